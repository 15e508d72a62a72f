"""libx264 gives the same bytes for the same frames, whatever the heap held before the encoder opened."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from vfm_curator.io.encode import H264Writer
from vfm_curator.synth import make_video
from vfm_curator.io.video import iter_decoded


def _dirty_heap(byte: int) -> None:
    """Leave freed heap blocks of many sizes filled with ``byte``, as earlier work in a worker leaves
    them: an encoder that reads memory it never wrote then sees ``byte``."""
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = []
    for size in [16 << k for k in range(14)] * 8:  # 16 B to 128 KiB
        block = libc.malloc(size)
        ctypes.memset(block, byte, size)
        blocks.append(block)
    for block in blocks:
        libc.free(block)


def test_libx264_writes_the_same_bytes_whatever_the_heap_held(tmp_path):
    try:
        ctypes.CDLL("libc.so.6")
    except OSError:
        pytest.skip("needs glibc to fill freed heap blocks")
    make_video(tmp_path / "v.mp4", [20, 16], seed=5)
    decoded = [(frame, rgb()) for frame, rgb in iter_decoded(str(tmp_path / "v.mp4"))]
    clips = {"decoded": [], "rgb": []}
    for byte in (0x00, 0xFF, 0x55, 0xAA, 0x00, 0x0F):
        for path, out in clips.items():
            _dirty_heap(byte)
            writer = H264Writer(24.0, codec="libx264", crf=20, preset="veryfast", threads=1)
            for frame, rgb in decoded:
                if path == "rgb" or not writer.write_decoded(frame):
                    writer.write(rgb, source=frame)
            out.append(writer.close())
    for path, out in clips.items():
        assert len(set(out)) == 1, f"{path}: {len(set(out))} different clips from the same frames"
