"""The demo's input videos each show another subject, so the captions a run generates and scores are
as many as its videos (``vfm demo --videos N`` for every N it accepts)."""

from __future__ import annotations

import json

from vfm_cli.demo.inputs import SUBJECTS, make_inputs, subjects_for


def test_every_video_count_up_to_all_subjects_gives_distinct_subjects():
    for videos in range(1, len(SUBJECTS) + 1):
        assert len(set(subjects_for(videos))) == videos, videos


def test_make_inputs_of_all_32_subjects_writes_32_different_captions(tmp_path):
    manifest = make_inputs(tmp_path, len(SUBJECTS), shots=1, frames_per_shot=2, size=16, shape_size=4)
    captions = [json.loads(line)["caption"] for line in manifest.read_text().splitlines()]
    assert len(captions) == len(set(captions)) == len(SUBJECTS)
