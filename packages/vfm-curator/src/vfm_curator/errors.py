"""Errors the pipelines tell apart: an unusable input, an input a configured limit excludes, a
condition that stops the whole run (disk full), and a run that wrote nothing to go on with."""

from __future__ import annotations


class InputError(Exception):
    """The input itself is unusable (not a video, cannot be decoded...); its message is the reason recorded."""

    cause = "input"
    kind = "unusable-input"


class LimitError(InputError):
    """The input is fine but a configured limit excludes it (shorter than ``min_clip_s``, every clip
    filtered...): a run with other options may succeed, so the failure is recorded with cause ``config``."""

    cause = "config"
    kind = "no-clips"

    def __init__(self, message: str, kind: str = "no-clips") -> None:
        super().__init__(message)
        self.kind = kind


class StopRun(Exception):
    """A condition no other video would escape (disk full): the run stops with this one-line message,
    keeping what it finished."""


class DiskFullError(StopRun):
    """No space left on the device while writing a file."""


class NothingWrittenError(ValueError):
    """``vfm_curator.curate`` / ``vfm_curator.shard`` wrote nothing to go on with (every video or clip
    failed, the filters kept nothing, the clip table is empty): the case where ``vfm curate`` /
    ``vfm shard`` exit 1. The message names how many failed, the commonest reasons and where
    ``failures.jsonl`` is; ``summary`` is the run's :class:`~vfm_curator.Summary` /
    :class:`~vfm_curator.ShardSummary` (the folder keeps failures.jsonl, summary.json and, for a
    re-run, what earlier runs wrote); ``failures`` is the path of failures.jsonl."""

    def __init__(self, message: str, summary, failures) -> None:
        super().__init__(message)
        self.summary = summary
        self.failures = failures

    def __reduce__(self):  # rebuilt from all three (ValueError's own pickling passes the message alone)
        return type(self), (str(self), self.summary, self.failures)
