"""Ring attention over P2P: each rank keeps its query shard and K/V blocks travel around the ring.

Forward: at step i a rank attends to the K/V block that started on rank (rank - i) and merges the
partial result by log-sum-exp (online softmax) while the next block is already in flight.
Backward is a real backward, not a recompute through autograd: K/V travel the ring again, each rank
adds its share of dK/dV to an accumulator that travels *with* the block, and after ``cp`` hops
every accumulator is back on the rank that owns the block (flash-attention backward per block:
P = exp(S - lse), dV = P^T dO, dS = P * (dO V^T - rowsum(dO * O)), dQ = dS K, dK = dS^T Q).
"""

from __future__ import annotations

from typing import Callable

import torch

from vfm_parallel.cp.comm import group_rank_size, ring_exchange_start
from vfm_parallel.cp.masks import default_scale, expand_kv, reduce_kv_grad

#: mask_for(source_rank) -> bool mask (.., Sq, Sk) for the K/V block that started on source_rank,
#: or None when every query may attend every key of it.
MaskFn = Callable[[int], "torch.Tensor | None"]
#: attends(source_rank) -> False when no query may attend any key of that block, decided on the host
#: (from the grid and the ranks' positions): reading a mask's values instead would stall a CUDA
#: stream once per hop. A block it does not rule out is computed; a fully masked one adds nothing.
AttendsFn = Callable[[int], bool]


def ring_attention(q, k, v, group, *, mask_for: MaskFn, attends: AttendsFn | None = None,
                   scale: float | None = None, layer: str = "cp.ring"):
    """Attention of the local queries over the K/V of every rank in ``group``.

    q (B, Hq, Sq, Dh), k, v (B, Hkv, Sk, Dh) are this rank's shards; returns (B, Hq, Sq, Dh).
    """
    return _RingAttention.apply(q, k, v, group, mask_for, attends or _every_block,
                                default_scale(q.shape[-1], scale), layer)


def _every_block(source: int) -> bool:
    return True


def _scaled_scores(q_scaled, k, mask):
    """(q * scale) k^T, masked: the scale is applied to q (Sq x Dh), not to the (Sq x Sk) scores."""
    s = torch.matmul(q_scaled, k.transpose(-1, -2))  # (B, H, Sq, Sk)
    return s if mask is None else s.masked_fill_(~mask, float("-inf"))


def _finite_or_zero(x):
    return torch.where(torch.isfinite(x), x, torch.zeros_like(x))


def _block_forward(q_scaled, k, v, mask):
    """Normalised block output (B, H, Sq, Dh) and its log-sum-exp (B, H, Sq); -inf for rows with no key.
    In place on the (Sq x Sk) scores: each full-size temporary costs as much as the matmul on a CPU."""
    s = _scaled_scores(q_scaled, k, mask)
    m = _finite_or_zero(s.amax(-1, keepdim=True))
    p = s.sub_(m).exp_()
    l = p.sum(-1, keepdim=True)
    out = torch.matmul(p, v).div_(torch.where(l > 0, l, torch.ones_like(l)))
    return out, (m + torch.log(l)).squeeze(-1)


def _merge(out, lse, out_b, lse_b):
    """Online-softmax merge of two partial results over disjoint key sets."""
    new = torch.logaddexp(lse, lse_b)
    safe = _finite_or_zero(new)
    out = out * torch.exp(lse - safe)[..., None] + out_b * torch.exp(lse_b - safe)[..., None]
    return out, new


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, group, mask_for, attends, scale, layer):
        rank, size = group_rank_size(group)
        hq = q.shape[1]
        qs = q.float() * scale
        out = torch.zeros_like(qs)
        lse = torch.full(q.shape[:-1], float("-inf"), dtype=torch.float32, device=q.device)
        k_cur, v_cur = k, v
        for step in range(size):
            pending = ring_exchange_start([k_cur, v_cur], group, layer) if step < size - 1 else None
            source = (rank - step) % size
            if attends(source):
                kx, vx = expand_kv(k_cur.float(), hq), expand_kv(v_cur.float(), hq)
                out_b, lse_b = _block_forward(qs, kx, vx, mask_for(source))
                out, lse = _merge(out, lse, out_b, lse_b)
            if pending is not None:
                k_cur, v_cur = pending()
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.group, ctx.mask_for, ctx.attends, ctx.scale, ctx.layer = group, mask_for, attends, scale, layer
        return out.to(q.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        group, scale, layer = ctx.group, ctx.scale, ctx.layer
        rank, size = group_rank_size(group)
        hq, hkv = q.shape[1], k.shape[1]
        qs, do = q.float() * scale, grad_out.float()
        delta = (do * out).sum(-1, keepdim=True)  # rowsum(dO * O), (B, H, Sq, 1)
        lse_safe = _finite_or_zero(lse)[..., None]
        dq = torch.zeros_like(qs)
        k_cur, v_cur = k, v
        dk_cur = torch.zeros(k.shape, dtype=torch.float32, device=k.device)
        dv_cur = torch.zeros(v.shape, dtype=torch.float32, device=v.device)
        for step in range(size):
            pending_kv = ring_exchange_start([k_cur, v_cur], group, layer) if step < size - 1 else None
            source = (rank - step) % size
            if ctx.attends(source):
                kx, vx = expand_kv(k_cur.float(), hq), expand_kv(v_cur.float(), hq)
                p = _scaled_scores(qs, kx, ctx.mask_for(source)).sub_(lse_safe).exp_()  # (B, H, Sq, Sk)
                dv_cur = dv_cur + reduce_kv_grad(torch.matmul(p.transpose(-1, -2), do), hkv)
                ds = torch.matmul(do, vx.transpose(-1, -2)).sub_(delta).mul_(p)  # P * (dO V^T - delta)
                dq = dq + torch.matmul(ds, kx)  # times scale once, after the last hop
                dk_cur = dk_cur + reduce_kv_grad(torch.matmul(ds.transpose(-1, -2), qs), hkv)
            if pending_kv is not None:
                k_cur, v_cur = pending_kv()
            if size > 1:
                # The accumulator follows its block; after the last hop it is home. Posted only
                # after the K/V hop completed, so two batches never race for the same peer pair.
                dk_cur, dv_cur = ring_exchange_start([dk_cur, dv_cur], group, layer)()
        return (dq * scale).to(q.dtype), dk_cur.to(k.dtype), dv_cur.to(v.dtype), None, None, None, None, None
