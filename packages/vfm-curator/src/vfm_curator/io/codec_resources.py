"""What the codecs may use of this process: the CPU threads it was given, the instruction sets
libx264 may use, and the heap freed by a closed encoder handed back to the system."""

from __future__ import annotations

import os


def threads_given() -> int:
    """The CPU threads this process was given (``OMP_NUM_THREADS``), or 0 when it was given none
    (FFmpeg's own choice: about one per core). In a Ray worker it is the CPUs its call was given
    (the runner defaults it to 1): the balancer already runs one worker per CPU, and a codec that
    also threads across cores it shares spends more CPU per frame (decoding: ~12 % warm, measured
    on 2 cores). The decoded pixels do not depend on it."""
    try:
        return max(0, int(os.environ.get("OMP_NUM_THREADS", "") or 0))
    except ValueError:
        return 0


def release_freed_memory() -> None:
    """Collect cycles (PyAV containers hold some) and hand freed heap back to the system (glibc's
    ``malloc_trim``; a no-op elsewhere). Called after each encoder closes: without it, the freed
    buffers of one 720p libx264 encoder after another fragment the heap and the resident size
    grows with the number of clips (255 MB vs 206 MB transcoding a 10-minute 720p video).

    Only the young generations are collected (where a just-closed container's objects are; PyAV
    18 leaves none in cycles): a full collection took ~26 ms a call, 15 % of transcoding small clips."""
    import ctypes
    import gc

    gc.collect(1)
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
