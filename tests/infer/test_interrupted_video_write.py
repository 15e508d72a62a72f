"""An interrupted write (Ctrl-C, SIGTERM raised as KeyboardInterrupt by ``vfm generate``) leaves no
truncated video, and the file an earlier run wrote there stays whole."""

from __future__ import annotations

import numpy as np
import pytest

from vfm_infer.video.mp4 import read_mp4, write_mp4


class _InterruptedFrames(np.ndarray):
    """uint8 frames whose iteration is interrupted after ``after`` frames, as a signal arriving while
    the encoder runs would interrupt it: past x264's look-ahead, so packets were already written."""

    after = 150

    def __iter__(self):
        for i, frame in enumerate(np.asarray(self)):
            if i == self.after:
                raise KeyboardInterrupt
            yield frame


def _frames(seed: int, t: int = 200) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (t, 16, 16, 3), dtype=np.uint8)


def test_an_interrupted_mp4_write_leaves_the_earlier_video_whole_and_no_partial_file(tmp_path):
    path = tmp_path / "0000.mp4"
    write_mp4(path, _frames(0, t=5))
    earlier = path.read_bytes()
    with pytest.raises(KeyboardInterrupt):
        write_mp4(path, _frames(1).view(_InterruptedFrames))
    assert path.read_bytes() == earlier and read_mp4(path).shape == (5, 16, 16, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0000.mp4"]


def test_an_interrupted_first_write_leaves_nothing(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        write_mp4(tmp_path / "0000.mp4", _frames(1).view(_InterruptedFrames))
    assert list(tmp_path.iterdir()) == []

