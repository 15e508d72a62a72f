"""The split stage's "no clip" reason counts shots, cuts and frames in the number each count takes:
"2 shots (1 cut in 48 frames)", not "2 shot(s) (1 cuts in ...)"."""

from __future__ import annotations

import numpy as np
import pytest

from vfm_curator.stages.base import LimitError
from vfm_curator.stages.split import SplitStage
from vfm_curator.tasks import VideoTask


def test_a_video_of_two_short_shots_says_1_cut_not_1_cuts(tmp_path):
    stage = SplitStage(method="stride", stride_s=1.0, min_clip_s=1.5, max_clip_s=10.0)
    task = VideoTask(str(tmp_path / "v.mp4"))
    task.times = np.arange(48) / 24.0  # 2 s at 24 fps: two 1 s spans, both under min_clip_s
    task.meta["fps"] = 24.0
    with pytest.raises(LimitError) as info:
        stage.process_one(task)
    assert str(info.value).startswith("no clip: 2 shots (1 cut in 48 frames), the longest 1.00 s")
