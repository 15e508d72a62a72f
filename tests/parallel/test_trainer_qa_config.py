"""Config errors name the key that is wrong: ``train.steps = 0`` is reported as train.steps, not as
the (default) warm-up being "more than train.steps = 0"."""

from __future__ import annotations

import pytest

from tests.parallel.trainer_helpers import tiny_config
from vfm_parallel.trainer import ConfigError, from_dict


@pytest.mark.parametrize("steps", [0, -3])
def test_train_steps_below_one_is_reported_as_train_steps(tmp_path, steps):
    with pytest.raises(ConfigError) as info:
        from_dict(tiny_config(tmp_path, train={"steps": steps}))  # warm-up 2 > steps as well
    assert info.value.key == "train.steps"
    assert f"must be >= 1, got {steps}" in str(info.value)


@pytest.mark.parametrize("shards", [[1], ["ok", ""], [["nested"]]], ids=["int", "empty", "list"])
def test_data_shards_that_are_not_folder_paths_are_reported_as_data_shards(tmp_path, shards):
    # `vfm train --validate --set data.shards=[1]` was a TypeError traceback from pathlib
    with pytest.raises(ConfigError) as info:
        from_dict(tiny_config(tmp_path, data={"source": "shards", "shards": shards}))
    assert info.value.key == "data.shards"
    assert "must be a list of dataset folder paths" in str(info.value)


def test_data_blend_and_data_shards_both_set_is_an_error_not_the_blend_alone(tmp_path):
    # the blend was read and data.shards ignored without a word
    with pytest.raises(ConfigError) as info:
        from_dict(tiny_config(tmp_path, data={"source": "shards", "blend": "b/blend.yaml", "shards": ["s/a"]}))
    assert info.value.key == "data"
    assert "set one of data.blend and data.shards" in str(info.value)
