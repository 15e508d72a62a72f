"""The collectives context parallelism issues, as autograd Functions that count their bytes.

Every collective here records in :mod:`vfm_parallel.comm_stats` the bytes of the buffer it moves
for this rank (seed table 2's convention: an all-to-all counts the rank's whole buffer, a ring hop
counts each block sent). ``layer`` names what the bytes were moved for (e.g. ``"cp.full"``).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from vfm_parallel import comm_stats

# torch >= 2.12 names them *_single; older releases only have *_into_tensor / *_tensor.
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def group_rank_size(group: dist.ProcessGroup) -> tuple[int, int]:
    """(rank inside ``group``, size of ``group``)."""
    return dist.get_rank(group), dist.get_world_size(group)


def ring_exchange_start(tensors: list[torch.Tensor], group: dist.ProcessGroup, layer: str):
    """Post one ring hop: each tensor goes to the next rank, the previous rank's arrives.

    Returns ``wait()``, which yields the received tensors; the caller computes in between, so the hop
    overlaps compute. Sends and receives are posted together (``batch_isend_irecv``) so that no rank
    waits on another's order.
    """
    rank, size = group_rank_size(group)
    nxt = dist.get_global_rank(group, (rank + 1) % size)
    prv = dist.get_global_rank(group, (rank - 1) % size)
    tensors = [t.contiguous() for t in tensors]  # kept alive by ``ops`` until the hop completes
    received = [torch.empty_like(t) for t in tensors]
    ops = []
    for t, r in zip(tensors, received):
        ops.append(dist.P2POp(dist.isend, t, nxt, group))
        ops.append(dist.P2POp(dist.irecv, r, prv, group))
        comm_stats.record("p2p", layer, comm_stats.tensor_bytes(t))
    works = dist.batch_isend_irecv(ops)

    def wait() -> list[torch.Tensor]:
        for w in works:
            w.wait()
        ops.clear()
        return received

    return wait


def all_to_all(send: list[torch.Tensor], recv_shapes: list[tuple[int, ...]], group, layer: str) -> list[torch.Tensor]:
    """``send[j]`` goes to rank ``j``; returns ``recv[i]`` (shape ``recv_shapes[i]``) from rank ``i``.

    Differentiable: the backward sends each ``recv[i]``'s gradient back to rank ``i``.
    """
    return list(_AllToAll.apply(group, layer, tuple(map(tuple, recv_shapes)), *send))


def _all_to_all_raw(send, recv_shapes, dtype, group, layer):
    recv = [torch.empty(shape, dtype=dtype, device=send[0].device) for shape in recv_shapes]
    send = [s.contiguous() for s in send]
    comm_stats.record("all_to_all", layer, sum(comm_stats.tensor_bytes(s) for s in send))
    if len({tuple(s.shape) for s in send} | {tuple(r.shape) for r in recv}) == 1:
        _equal_all_to_all(send, recv, group)
    else:  # gloo's all_to_all takes equal chunks only: uneven ones go pairwise, sizes known both sides
        _pairwise_exchange(send, recv, group)
    return recv


def _equal_all_to_all(send, recv, group) -> None:
    if dist.get_backend(group) != "gloo":
        dist.all_to_all(recv, send, group=group)
        return
    # gloo's list all_to_all is missing in torch 2.11 and older ("Backend gloo does not support
    # alltoall"; 2.13 has it); all_to_all_single, gloo's alltoall_base, is there in every release.
    out = torch.empty((len(recv), *recv[0].shape), dtype=recv[0].dtype, device=recv[0].device)
    dist.all_to_all_single(out, torch.stack(send), group=group)
    for r, chunk in zip(recv, out):
        r.copy_(chunk)


def _pairwise_exchange(send, recv, group) -> None:
    rank, size = group_rank_size(group)
    recv[rank].copy_(send[rank])
    ops = []
    for peer in range(size):
        if peer == rank:
            continue
        global_peer = dist.get_global_rank(group, peer)
        if send[peer].numel():
            ops.append(dist.P2POp(dist.isend, send[peer], global_peer, group))
        if recv[peer].numel():
            ops.append(dist.P2POp(dist.irecv, recv[peer], global_peer, group))
    for work in dist.batch_isend_irecv(ops) if ops else []:
        work.wait()


class _AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, group, layer, recv_shapes, *send):
        ctx.group, ctx.layer = group, layer
        ctx.send_shapes = [tuple(s.shape) for s in send]
        ctx.recv_shapes = recv_shapes
        ctx.dtype, ctx.device = send[0].dtype, send[0].device
        return tuple(_all_to_all_raw(send, recv_shapes, send[0].dtype, group, layer))

    @staticmethod
    def backward(ctx, *grad_recv):
        grads = [g if g is not None else torch.zeros(s, dtype=ctx.dtype, device=ctx.device)
                 for g, s in zip(grad_recv, ctx.recv_shapes)]
        grad_send = _all_to_all_raw(grads, ctx.send_shapes, grads[0].dtype, ctx.group, ctx.layer)
        return (None, None, None, *grad_send)


def all_gather_seq(x: torch.Tensor, dim: int, group, layer: str) -> torch.Tensor:
    """Concatenate every rank's ``x`` along ``dim`` (rank order). The backward sums the gradients of
    all ranks and hands each rank its own chunk (reduce-scatter), so it stays exact even when the
    ranks' downstream computations differ."""
    return _GatherSeq.apply(x, dim, group, layer)


def _gather_dim0(x: torch.Tensor, group, layer: str) -> torch.Tensor:
    _, size = group_rank_size(group)
    x = x.contiguous()
    out = torch.empty((size * x.shape[0], *x.shape[1:]), dtype=x.dtype, device=x.device)
    comm_stats.record("all_gather", layer, comm_stats.tensor_bytes(x))
    _all_gather(out, x, group=group)
    return out


class _GatherSeq(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, group, layer):
        ctx.dim, ctx.group, ctx.layer = dim, group, layer
        gathered = _gather_dim0(x.movedim(dim, 0), group, layer)
        if dim == 0:
            return gathered
        # A fresh tensor, not a view of the gather buffer: under CP this is the last block's output,
        # on which FSDP2 registers its pre-backward hook (an in-place op on a view drops that hook,
        # and FSDP2 warns on every forward that is handed one).
        return gathered.movedim(0, dim).clone(memory_format=torch.contiguous_format)

    @staticmethod
    def backward(ctx, grad):
        _, size = group_rank_size(ctx.group)
        g = grad.movedim(ctx.dim, 0).contiguous()
        out = torch.empty((g.shape[0] // size, *g.shape[1:]), dtype=g.dtype, device=g.device)
        comm_stats.record("reduce_scatter", ctx.layer, comm_stats.tensor_bytes(g))
        _reduce_scatter(out, g, group=ctx.group)
        return out.movedim(0, ctx.dim), None, None, None


def gather_no_grad(x: torch.Tensor, dim: int, group, layer: str) -> torch.Tensor:
    """All-gather of a tensor that needs no gradient (masks, metadata)."""
    return _gather_dim0(x.movedim(dim, 0), group, layer).movedim(0, dim)
