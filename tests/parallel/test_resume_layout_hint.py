"""Resuming a context-parallel checkpoint under another cp: the refusal says which
``train.noise_chunks`` keeps the saved run's noise (the documented way to change cp), and with it
the settings match."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.parallel.trainer_helpers import tiny_config
from vfm_parallel import checkpoint as ckpt
from vfm_parallel.trainer import ConfigError, from_dict
from vfm_parallel.trainer import resume as resume_mod


def _saved(cfg) -> dict:
    return {"config": cfg.to_dict(), "sizes": cfg.parallel.resolved(2)}


def test_a_cp2_checkpoint_resumed_under_tp2_names_the_noise_chunks_that_continue_it(tmp_path):
    saved = from_dict(tiny_config(tmp_path, parallel={"cp": 2, "dp_shard": 1}), 2)
    now = from_dict(tiny_config(tmp_path, parallel={"tp": 2, "dp_shard": 1}), 2)
    with pytest.raises(ckpt.IncompatibleCheckpointError) as error:
        resume_mod.check_settings(Path("step_4"), _saved(saved), now, now.parallel.resolved(2))
    assert "To continue it exactly under this layout: train.noise_chunks = 2" in str(error.value)
    kept = from_dict(tiny_config(tmp_path, parallel={"tp": 2, "dp_shard": 1}, train={"noise_chunks": 2}), 2)
    resume_mod.check_settings(Path("step_4"), _saved(saved), kept, kept.parallel.resolved(2))  # accepted


def test_no_noise_chunks_hint_when_other_settings_changed_too(tmp_path):
    saved = from_dict(tiny_config(tmp_path, parallel={"cp": 2, "dp_shard": 1}), 2)
    now = from_dict(tiny_config(tmp_path, parallel={"tp": 2, "dp_shard": 1}, train={"seed": 8}), 2)
    with pytest.raises(ckpt.IncompatibleCheckpointError) as error:
        resume_mod.check_settings(Path("step_4"), _saved(saved), now, now.parallel.resolved(2))
    assert "train.seed 7 -> 8" in str(error.value) and "noise_chunks = 2" not in str(error.value)


def test_a_one_chunk_checkpoint_resumed_under_cp2_names_a_layout_that_takes_its_noise_chunks(tmp_path):
    """Under cp > 1 the noise is drawn in cp chunks (train.noise_chunks must be 0 or cp), so the hint
    may not offer train.noise_chunks = 1 "under this layout": that config is refused."""
    saved = from_dict(tiny_config(tmp_path, parallel={"tp": 2, "dp_shard": 1}), 2)
    now = from_dict(tiny_config(tmp_path, parallel={"cp": 2, "dp_shard": 1}), 2)
    with pytest.raises(ckpt.IncompatibleCheckpointError) as error:
        resume_mod.check_settings(Path("step_4"), _saved(saved), now, now.parallel.resolved(2))
    message = str(error.value)
    assert "under this layout" not in message
    assert "parallel.cp = 1 and train.noise_chunks = 1" in message, message
    with pytest.raises(ConfigError, match="noise_chunks"):  # what the old hint led to
        from_dict(tiny_config(tmp_path, parallel={"cp": 2, "dp_shard": 1}, train={"noise_chunks": 1}), 2)
    kept = from_dict(tiny_config(tmp_path, parallel={"tp": 2, "dp_shard": 1}, train={"noise_chunks": 1}), 2)
    resume_mod.check_settings(Path("step_4"), _saved(saved), kept, kept.parallel.resolved(2))  # accepted


def test_a_cp2_checkpoint_resumed_under_cp4_names_the_layouts_that_continue_it(tmp_path):
    saved = from_dict(tiny_config(tmp_path, parallel={"cp": 2, "dp_shard": 1}), 2)
    now = from_dict(tiny_config(tmp_path, parallel={"cp": 4, "dp_shard": 1}), 4)
    with pytest.raises(ckpt.IncompatibleCheckpointError) as error:
        resume_mod.check_settings(Path("step_4"), _saved(saved), now, now.parallel.resolved(4))
    assert "parallel.cp = 1 or 2 and train.noise_chunks = 2" in str(error.value), str(error.value)
