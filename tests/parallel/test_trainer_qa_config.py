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
