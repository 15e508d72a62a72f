"""The full weights an export or a preview takes are gathered to rank 0 alone (real gloo ranks): rank 0's
equal every rank's full copy before, the other ranks take part in the gathers and hold none."""

from __future__ import annotations

import pytest
import torch

from tests.gloo import spawn
from tests.parallel.trainer_helpers import build_parts, tiny_config
from vfm_parallel.trainer import from_dict


def _export_weights(rank, world, root, parallel):
    from vfm_parallel.trainer import trainer as trainer_mod
    from vfm_parallel.trainer.saving import full_weights
    from vfm_parallel.trainer.stopping import StopRequests

    cfg = from_dict(tiny_config(root, parallel=parallel, train={"steps": 2}), world)
    run = trainer_mod._Run(cfg, build_parts, (), trainer_mod.parallelize_model, StopRequests())
    for step in (1, 2):  # EMA weights that differ from the model's and from the init
        run.step(step)
    # every rank's full copy, as export_weights gathered it before (the reference rank 0 must equal)
    everywhere = full_weights(run.ema.shadow.items())
    if run.pipelined:
        import torch.distributed as dist

        parts = [None] * dist.get_world_size(run.stage_group)
        dist.all_gather_object(parts, everywhere, group=run.stage_group)
        everywhere = {k: v for part in parts for k, v in part.items()}
    mine = run.export_weights()
    return {"mine": mine, "everywhere": everywhere}


@pytest.mark.parametrize("parallel", [{"dp_shard": 2, "dp_replicate": 1}, {"pp": 2, "dp_shard": 1}], ids=["fsdp2", "pp2"])
def test_only_rank_0_holds_the_full_export_weights_and_they_equal_every_ranks_copy_before(tmp_path, parallel):
    rank0, rank1 = spawn(_export_weights, 2, tmp_path, parallel)
    assert rank1["mine"] == {}  # rank 1 took part in the gathers and kept nothing
    assert rank0["mine"].keys() == rank0["everywhere"].keys() == rank1["everywhere"].keys()
    assert all(torch.equal(rank0["mine"][k], rank0["everywhere"][k]) for k in rank0["mine"])
    assert all(t.device.type == "cpu" for t in rank0["mine"].values())
