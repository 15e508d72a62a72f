"""torch's fused AdamW under sharded parameters: FSDP's and TP's DTensors, and TP's plain replicated
parameters beside them, take the fused kernel (which skips a non-finite step on the device, with no
host sync per step) and step as the non-fused AdamW does."""

from __future__ import annotations

import torch

from tests.gloo import spawn
from vfm_parallel.trainer.config.sections import OptimConfig
from vfm_parallel.trainer.optimizer import adamw, is_fused


def _params(mesh_1d):
    """A Shard(0) DTensor (FSDP-like), a Shard(1) DTensor (TP column-like), a Replicate DTensor and a
    plain tensor (TP's replicated norms), with gradients: the same values on every rank."""
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    g = torch.Generator().manual_seed(0)
    out = []
    for placement, shape in ((Shard(0), (4, 6)), (Shard(1), (3, 4)), (Replicate(), (5,)), (None, (7,))):
        value, grad = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
        if placement is None:
            p = torch.nn.Parameter(value)
            p.grad = grad
        else:
            p = torch.nn.Parameter(distribute_tensor(value, mesh_1d, [placement]))
            p.grad = distribute_tensor(grad, mesh_1d, [placement])
        out.append(p)
    return out


def _full(p):
    return p.full_tensor() if hasattr(p, "full_tensor") else p.detach().clone()


def _fused_and_plain(rank, world):
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (world,))
    results = {}
    for mode in ("on", "off"):
        params = _params(mesh)
        opt = adamw(params, OptimConfig(lr=0.1, weight_decay=0.01, fused=mode), torch.device("cpu"))
        for _ in range(3):
            opt.step()
        skipped_from = [_full(p) for p in params]
        if mode == "on":  # the device-side skip the trainer uses: found_inf set, the step leaves all as it was
            opt.found_inf = torch.ones((), dtype=torch.float32)
            opt.step()
            opt.found_inf = None
        results[mode] = {"fused": is_fused(opt), "after": [_full(p) for p in params], "before_skip": skipped_from}
    return results


def test_fused_adamw_takes_dtensors_and_plain_parameters_together_and_steps_as_the_plain_adamw():
    for result in spawn(_fused_and_plain, 2):
        assert result["on"]["fused"] and not result["off"]["fused"]
        for fused, plain in zip(result["on"]["after"], result["off"]["after"]):
            torch.testing.assert_close(fused, plain, rtol=1e-5, atol=1e-6)
        assert all(torch.equal(a, b) for a, b in zip(result["on"]["after"], result["on"]["before_skip"]))
