"""Counts in the pipeline's shape messages take the number of their noun: "1 frame at 16x16", not
"1 frames" (the untrained-shape warning, the tokenizer and memory errors all name pixel frames)."""

from __future__ import annotations

import pytest

from vfm_infer.pipeline import VideoPipeline
from vfm_plugins.text import counted
from tests.infer.tiny import tiny_dit, tiny_meta


def test_counted_gives_one_frame_and_two_frames():
    assert [counted(n, "frame") for n in (0, 1, 2)] == ["0 frames", "1 frame", "2 frames"]
    assert counted(1, "latent frame") == "1 latent frame"


def test_the_untrained_shape_warning_says_1_frame_not_1_frames():
    pipe = VideoPipeline(tiny_dit(), tiny_meta())  # trained on latent (12, 4, 8, 8): 4 frames at 16x16
    note = pipe.untrained_shape(pipe.latent_shape(1, None))
    assert "; 1 frame at 16x16 is a shape it never saw" in note
    assert "1 frames" not in note


def test_a_size_the_tokenizer_refuses_names_1_frame():
    pipe = VideoPipeline(tiny_dit(), tiny_meta(tokenizer_options={"patch": 2, "channels": 3}))
    with pytest.raises(ValueError) as info:
        pipe.latent_shape(1, (0, 16))
    assert "got 1 frame at 0x16" in str(info.value)
