"""Autograd functions that move a sequence between "sharded" and "whole" over a process group.

Used by sequence parallelism (the TP group) and recorded in :mod:`vfm_parallel.comm_stats`. The
sequence dimension is 1 throughout: tokens are (B, S, D).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from vfm_parallel import comm_stats


def _all_gather_seq(x: torch.Tensor, group, layer: str) -> torch.Tensor:
    world = dist.get_world_size(group)
    parts = [torch.empty_like(x) for _ in range(world)]
    comm_stats.record("all_gather", layer, comm_stats.tensor_bytes(x))
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts, dim=1)


def _local_chunk(x: torch.Tensor, group) -> torch.Tensor:
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    if x.shape[1] % world:
        raise ValueError(f"sequence length {x.shape[1]} is not divisible by the {world} ranks sharding it")
    return x.chunk(world, dim=1)[rank].contiguous()


class SplitSequence(torch.autograd.Function):
    """Forward: keep this rank's contiguous chunk of the sequence. Backward: all-gather the grads."""

    @staticmethod
    def forward(ctx, x, group, layer):
        ctx.group, ctx.layer = group, layer
        return _local_chunk(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _all_gather_seq(grad, ctx.group, ctx.layer), None, None


class GatherSequence(torch.autograd.Function):
    """Forward: all-gather the chunks into the whole sequence. Backward: keep this rank's chunk of
    the gradient (what follows runs replicated, so every rank holds the same whole gradient)."""

    @staticmethod
    def forward(ctx, x, group, layer):
        ctx.group = group
        return _all_gather_seq(x, group, layer)

    @staticmethod
    def backward(ctx, grad):
        return _local_chunk(grad, ctx.group), None, None


class ReduceGradients(torch.autograd.Function):
    """Forward: identity. Backward: sum the gradient over the group (Megatron's "f" operator):
    a replicated input used on a sequence shard receives only that shard's part of its gradient."""

    @staticmethod
    def forward(ctx, x, group, layer):
        ctx.group, ctx.layer = group, layer
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        comm_stats.record("all_reduce", ctx.layer, comm_stats.tensor_bytes(grad))
        dist.all_reduce(grad, group=ctx.group)
        return grad, None, None
