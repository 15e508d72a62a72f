"""Reading videos with PyAV: probing, and decoding frames upright (rotation applied) with their times.

The code lives in one module per concern; this module re-exports their names, so that
``from vfm_curator.io.video import iter_frames`` (stages, decoders, tests, benchmarks) keeps
working:

- :mod:`vfm_curator.io.container`: opening a file (a clear reason when it is no video; hwaccel)
  and choosing the video stream to read
- :mod:`vfm_curator.io.probing`: the stream's facts (:class:`Probe`) and the frame-size limit
- :mod:`vfm_curator.io.frames`: decoding frames in presentation order, with their times
- :mod:`vfm_curator.io.deinterlace`: ``bwdif`` over interlaced sources, as they are read
- :mod:`vfm_curator.io.rgb`: a decoded frame as upright RGB, exactly rounded
- :mod:`vfm_curator.io.scaling`: swscale's flags per size, the detection-shrink rule, small sizes
- :mod:`vfm_curator.io.codec_resources`: the threads a codec may use, heap handed back after encoding

A test that replaces a function with ``monkeypatch`` patches it in the module that calls it
(listed above): replacing the name here changes nothing the code calls.
"""

from __future__ import annotations

from vfm_curator.io.codec_resources import release_freed_memory, threads_given
from vfm_curator.io.container import open_container, video_stream
from vfm_curator.io.frames import frames_at, iter_decoded, iter_frames
from vfm_curator.io.probing import MAX_PIXELS, Probe, display_width, probe, sample_aspect
from vfm_curator.io.rgb import upright
from vfm_curator.io.scaling import (
    FULL_SIZE_FLAGS,
    SCALED_FLAGS,
    SMALL_FLAGS,
    SMALL_MAX_SIDE,
    is_detection_shrink,
    scaled_flags,
    small_size,
)

# private, but imported from here by decoders/pyav.py and tests/curator/test_colour_fidelity.py
from vfm_curator.io.frames import _decoded  # noqa: F401
from vfm_curator.io.rgb import _to_rgb  # noqa: F401

__all__ = [
    "FULL_SIZE_FLAGS", "MAX_PIXELS", "SCALED_FLAGS", "SMALL_FLAGS", "SMALL_MAX_SIDE", "Probe", "display_width",
    "frames_at", "is_detection_shrink", "iter_decoded", "iter_frames", "open_container", "probe",
    "release_freed_memory", "sample_aspect", "scaled_flags", "small_size", "threads_given", "upright", "video_stream",
]
