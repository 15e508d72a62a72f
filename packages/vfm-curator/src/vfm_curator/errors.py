"""The error that marks an input unusable; raised by video I/O and by stages, recorded per task."""

from __future__ import annotations


class InputError(Exception):
    """The input itself is unusable (not a video, too short...); its message is the reason recorded."""
