"""``checkpoint.load_weights`` reads a checkpoint's whole weights in the process that calls it: after a
2-rank FSDP run (real gloo ranks) rank 0 alone loads them for an export while its peer does nothing, as a
training script that writes the export on rank 0 does. It waited for the peer in a collective before, and
the script hung until the process group's timeout."""

from __future__ import annotations

import torch
import torch.distributed as dist

from tests.gloo import spawn
from tests.parallel.toy_model import ToyDiT, toy_batch


def _train_save_then_load_on_rank_0(rank, world, root):
    from vfm_parallel import ParallelDims, checkpoint, parallelize

    torch.manual_seed(0)
    pm = parallelize(ToyDiT(), ParallelDims(dp_shard=world), ["fsdp"], device_type="cpu")
    opt = torch.optim.AdamW(pm.model.parameters(), lr=1e-2)
    x, t, cond, target = toy_batch(seed=rank)
    torch.nn.functional.mse_loss(pm.model(x, t, cond), target).backward()
    pm.sync_grads()
    opt.step()  # weights that differ from any fresh init
    trained = {k: v.full_tensor() for k, v in pm.model.state_dict().items()}  # collective: every rank
    path = checkpoint.save(root, 1, model=pm.model, optimizer=opt)
    checkpoint.verify(path)  # collective, as load_weights asks
    dist.barrier()
    if rank != 0:
        return None
    torch.manual_seed(1)
    whole = ToyDiT()
    checkpoint.load_weights(path, whole)  # rank 0 alone
    return {"trained": trained, "loaded": whole.state_dict()}


def test_one_rank_alone_loads_the_whole_weights_of_a_checkpoint_that_two_fsdp_ranks_saved(tmp_path):
    rank0, rank1 = spawn(_train_save_then_load_on_rank_0, 2, tmp_path, timeout=120)
    assert rank1 is None
    assert rank0["loaded"].keys() == rank0["trained"].keys()
    assert all(torch.equal(rank0["loaded"][k], rank0["trained"][k]) for k in rank0["trained"])
