"""Gradient reductions that no wrapper (DDP/FSDP) performs, run by ``ParallelModel.sync_grads()``.

Examples: replicated parameters that saw only this rank's share of the heads or of the sequence
under TP/SP (their gradients are partial sums), and conditioning embedders duplicated on every
pipeline stage (each stage holds the part of the gradient that its blocks produced).
"""

from __future__ import annotations

from typing import Callable, Iterable

import torch
import torch.distributed as dist
from torch import nn

from vfm_parallel import comm_stats

_ATTR = "_vfm_grad_syncs"


def add(model: nn.Module, fn: Callable[[nn.Module], None]) -> None:
    """Run ``fn(model)`` after every backward, when ``sync_grads`` is called."""
    syncs = model.__dict__.setdefault(_ATTR, [])
    syncs.append(fn)


def run(model: nn.Module) -> None:
    for fn in model.__dict__.get(_ATTR, []):
        fn(model)


def local_grad(param: torch.Tensor) -> torch.Tensor | None:
    """The local tensor of ``param.grad`` (DTensor grads from FSDP/TP give their local shard)."""
    grad = param.grad
    if grad is None:
        return None
    return grad.to_local() if hasattr(grad, "to_local") else grad


def all_reduce_grads(model: nn.Module, names: Iterable[str], group, layer: str) -> None:
    """Sum the gradients of the parameters ``names`` over ``group``, in one flat buffer.

    A parameter without a gradient on this rank contributes zeros (so that every rank issues the
    same collective), and receives the sum.
    """
    params = dict(model.named_parameters())
    chosen = [params[n] for n in names if n in params]
    if not chosen or dist.get_world_size(group) == 1:
        return
    locals_ = []
    for p in chosen:
        g = local_grad(p)
        if g is None:
            local_p = p.to_local() if hasattr(p, "to_local") else p
            g = torch.zeros_like(local_p)
            p.grad = _like_param(p, g)
            g = local_grad(p)
        locals_.append(g)
    flat = torch.cat([g.reshape(-1) for g in locals_])
    comm_stats.record("all_reduce", layer, comm_stats.tensor_bytes(flat))
    dist.all_reduce(flat, group=group)
    offset = 0
    for g in locals_:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()


def _like_param(param: torch.Tensor, local: torch.Tensor) -> torch.Tensor:
    if hasattr(param, "to_local"):  # DTensor parameter: a DTensor gradient with its layout
        from torch.distributed.tensor import DTensor

        return DTensor.from_local(local, param.device_mesh, param.placements, run_check=False)
    return local
