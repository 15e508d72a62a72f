"""The trainer under DDP (``dp_replicate = 2``, the layout `vfm plan` ranks first for small models):
its checkpoint, EMA and export names are the single-process names (not DDP's ``module.`` prefix),
so the checkpoint loads in one process and the export builds; the losses equal the single-process
run with the same micro-batches per step."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from tests.gloo import spawn
from tests.parallel.test_trainer_distributed import _load_under, _plain
from tests.parallel.trainer_helpers import run_config, tiny_config, tiny_model
from vfm_parallel.trainer.saving import full_weights

STEPS = 3


def _ddp(rank, world, root):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    result = run_config(tiny_config(root, train={"steps": STEPS}, parallel={"dp_replicate": 2, "dp_shard": 1}))
    return (result.losses, _plain(full_weights(result.model.named_parameters())), str(result.checkpoint)) if rank == 0 else None


def test_a_ddp_run_saves_single_process_names_that_load_in_one_process(tmp_path):
    losses, weights, path = spawn(_ddp, 2, tmp_path / "ddp")[0]
    names = {name for name, _ in tiny_model().named_parameters()}
    assert set(weights) == names  # not "module.x_embedder..."
    torch.set_num_threads(1)
    reference = run_config(tiny_config(tmp_path / "one", train={"steps": STEPS}, optim={"grad_accum": 2}))
    assert losses.keys() == reference.losses.keys()
    for step, loss in reference.losses.items():
        assert abs(losses[step] - loss) <= 1e-5 * abs(loss), f"step {step}: {losses[step]} vs {loss}"
    one_weights, one_ema = _load_under({"dp_shard": 1}, Path(path), 1, 0)  # model and EMA, in one process
    assert one_ema.keys() == names
    for name in names:
        assert (one_weights[name] == weights[name]).all(), name
