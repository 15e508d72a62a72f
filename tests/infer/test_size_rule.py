"""A pixel size off the model's grid is refused once, with the whole rule (the tokenizer's spatial
compression times the model's patch, even for H264) and the nearest accepted sizes: 33x32 was first
"divisible by 2", then, at 34x32, "multiples of 4"."""

from __future__ import annotations

import pytest

from vfm_infer.pipeline import VideoPipeline
from tests.infer.tiny import tiny_dit, tiny_meta

RULE = "this model takes height and width multiples of 4 (its tokenizer's spatial compression 2 x its patch 2x2)"


@pytest.mark.parametrize("size", [(33, 32), (34, 32), (35, 32)])
def test_a_size_off_the_grid_states_the_whole_rule_and_the_nearest_sizes(size):
    pipe = VideoPipeline(tiny_dit(), tiny_meta())  # pixel tokenizer at patch 2, DiT patch (1, 2, 2)
    with pytest.raises(ValueError) as info:
        pipe.latent_shape(None, size)
    assert str(info.value) == (f"size {size[0]}x{size[1]} is not accepted: {RULE}; "
                               "the nearest accepted sizes are 32x32 or 36x32")
    assert pipe.latent_shape(None, (32, 32)) == (12, 4, 16, 16)  # a size the rule names is taken


def test_a_size_below_one_step_names_the_smallest_accepted_size():
    pipe = VideoPipeline(tiny_dit(), tiny_meta())
    with pytest.raises(ValueError, match="the nearest accepted size is 4x8$"):
        pipe.latent_shape(None, (2, 8))


def test_the_h264_even_rule_is_part_of_the_steps_where_the_grid_is_odd():
    pipe = VideoPipeline(tiny_dit(patch=(1, 1, 1)), tiny_meta(tokenizer_options={"patch": 1}, latent_shape=[3, 4, 8, 8]),)
    with pytest.raises(ValueError) as info:
        pipe.latent_shape(None, (15, 16))
    assert "multiples of 2 (its tokenizer's spatial compression 1 x its patch 1x1, and even for H264)" in str(info.value)
    assert str(info.value).endswith("the nearest accepted sizes are 14x16 or 16x16")
