"""Pipeline-parallel training (pp=2 over gloo, 1F1B and GPipe) against the single-process run.

The formulation hands the schedule its loss cut at the network (training_pieces); the last stage
computes the weighted MSE. Timestep and noise are drawn alike on both stages (seed table 3).
"""

from __future__ import annotations

import os

import pytest
import torch

from tests.gloo import spawn
from tests.parallel.trainer_helpers import run_config, tiny_config, tiny_model
from vfm_parallel.trainer.saving import full_weights

STEPS = 3
CLIP = {"grad_clip": 0.3}  # below the tiny run's gradient norms (~0.4-0.6): clipping needs the norm over both stages


def _run(data):
    result = run_config(data)
    return result.losses, {k: v.numpy() for k, v in full_weights(result.model.named_parameters()).items()}


def _configs(root):
    return {
        "1f1b": tiny_config(root / "1f1b", train={"steps": STEPS}, optim=CLIP,
                            parallel={"pp": 2, "dp_shard": 1}),
        "gpipe-accum2": tiny_config(root / "gpipe", train={"steps": STEPS}, optim={"grad_accum": 2, **CLIP},
                                    parallel={"pp": 2, "dp_shard": 1, "pp_schedule": "gpipe"}),
    }


def _pp2(rank, world, root):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    return {name: _run(data) for name, data in _configs(root).items()}


@pytest.fixture(scope="module")
def pp_runs(tmp_path_factory):
    return spawn(_pp2, 2, tmp_path_factory.mktemp("pp"))


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("ref")
    out = {}
    for name, data in _configs(root).items():
        data["parallel"] = {}
        out[name] = _run(data)
    return out


@pytest.mark.parametrize("name", ["1f1b", "gpipe-accum2"])
def test_pp2_run_losses_and_weights_equal_the_single_process_run(pp_runs, references, name):
    ref_losses, ref_weights = references[name]
    (losses0, weights0), (losses1, weights1) = pp_runs[0][name], pp_runs[1][name]
    assert losses0.keys() == losses1.keys() == ref_losses.keys() == set(range(1, STEPS + 1))
    for step, ref in ref_losses.items():
        assert losses0[step] == pytest.approx(ref, rel=1e-5, abs=1e-6), f"step {step}"
        assert losses1[step] == losses0[step]  # every rank reports the last stage's loss
    # the stages together hold every parameter, under single-process names
    merged = {**weights0, **weights1}
    assert merged.keys() == ref_weights.keys()
    for key, ref in ref_weights.items():
        torch.testing.assert_close(torch.from_numpy(merged[key]), torch.from_numpy(ref), rtol=1e-4, atol=1e-5, msg=key)


def test_pp2_conditioning_embedders_stay_identical_on_both_stages(pp_runs):
    conditioning = tiny_model().parallel_plan().conditioning
    for name in ("1f1b", "gpipe-accum2"):
        (_, weights0), (_, weights1) = pp_runs[0][name], pp_runs[1][name]
        keys = [k for k in weights0 if k.split(".")[0] in conditioning]
        assert keys and set(keys) <= set(weights1)
        for key in keys:
            assert (weights0[key] == weights1[key]).all(), key
        blocks0 = {k for k in weights0 if k.startswith("blocks.")}
        assert blocks0 and not blocks0 & set(weights1)  # each stage holds its own blocks only


def test_a_micro_batch_the_pipeline_cannot_split_is_a_config_error_naming_the_key(tmp_path):
    from vfm_parallel.trainer import from_dict
    from vfm_parallel.trainer.config import ConfigError

    # raised by validation, before any process group starts (so `vfm train --validate` catches it)
    with pytest.raises(ConfigError, match="data.micro_batch.*3 samples do not split into 2"):
        from_dict(tiny_config(tmp_path, parallel={"pp": 2, "dp_shard": 1}, data={"micro_batch": 3}), 2)
    with pytest.raises(ConfigError, match="1f1b needs at least pp = 2"):
        from_dict(tiny_config(tmp_path, parallel={"pp": 2, "dp_shard": 1, "pp_microbatches": 1}), 2)
    with pytest.raises(ConfigError, match="parallel.pp_schedule"):
        from_dict(tiny_config(tmp_path, parallel={"pp": 2, "dp_shard": 1, "pp_schedule": "zb"}), 2)
