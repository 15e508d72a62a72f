"""libx264 options every vfm encoder adds so that the same frames give the same H264 bytes.

The x264 in PyAV 18's wheel (core 165) reads memory it never wrote in its AVX-512 code: the same
frames gave different bytes from one encoder to the next in a process, depending on what the heap
held (transcode, 96x64: 5 of 16 processes; with ``asm=AVX2`` 0 of 16; MALLOC_PERTURB_ hid it). So on
a CPU with AVX-512 x264 is held to its AVX2 code. Every CPU with AVX-512 has AVX2 (and the FMA3,
BMI1/2 and LZCNT that x264's AVX2 level implies), so the level named exists. Cost: ~12 % more time
a 720p frame (7.1 -> 8.1 ms, veryfast, 1 thread)."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=None)
def x264_asm(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The value of libx264's ``asm`` option this machine needs: ``"AVX2"`` on an x86 CPU with
    AVX-512, else None (libx264's own choice)."""
    try:
        with open(cpuinfo) as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:  # not Linux: no AVX-512 that we can see
        return None
    return "AVX2" if "avx512f" in flags else None


def x264_options(options: dict[str, str]) -> dict[str, str]:
    """``options`` for a libx264 stream with the ``asm`` level :func:`x264_asm` asks for added to
    its ``x264-params`` (kept as given where none is needed)."""
    asm = x264_asm()
    if asm is None:
        return dict(options)
    params = options.get("x264-params")
    return {**options, "x264-params": f"{params}:asm={asm}" if params else f"asm={asm}"}
