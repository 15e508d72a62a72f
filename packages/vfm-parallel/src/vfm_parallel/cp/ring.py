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


def ring_attention(q, k, v, group, *, mask_for: MaskFn, scale: float | None = None, layer: str = "cp.ring"):
    """Attention of the local queries over the K/V of every rank in ``group``.

    q (B, Hq, Sq, Dh), k, v (B, Hkv, Sk, Dh) are this rank's shards; returns (B, Hq, Sq, Dh).
    """
    return _RingAttention.apply(q, k, v, group, mask_for, default_scale(q.shape[-1], scale), layer)


def _skip(mask) -> bool:
    """A block nobody may attend costs neither compute nor a merge. A mask without values (the meta
    device: shapes only) is computed as it is, which gives the same result."""
    return mask is not None and mask.device.type != "meta" and not bool(mask.any())


def _scores(q, k, mask, scale):
    s = torch.matmul(q, k.transpose(-1, -2)) * scale  # (B, H, Sq, Sk)
    return s if mask is None else s.masked_fill(~mask, float("-inf"))


def _finite_or_zero(x):
    return torch.where(torch.isfinite(x), x, torch.zeros_like(x))


def _block_forward(q, k, v, mask, scale):
    """Normalised block output (B, H, Sq, Dh) and its log-sum-exp (B, H, Sq); -inf for rows with no key."""
    s = _scores(q, k, mask, scale)
    m = _finite_or_zero(s.amax(-1, keepdim=True))
    p = torch.exp(s - m)
    l = p.sum(-1, keepdim=True)
    out = torch.matmul(p, v) / torch.where(l > 0, l, torch.ones_like(l))
    return out, (m + torch.log(l)).squeeze(-1)


def _merge(out, lse, out_b, lse_b):
    """Online-softmax merge of two partial results over disjoint key sets."""
    new = torch.logaddexp(lse, lse_b)
    safe = _finite_or_zero(new)
    out = out * torch.exp(lse - safe)[..., None] + out_b * torch.exp(lse_b - safe)[..., None]
    return out, new


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, group, mask_for, scale, layer):
        rank, size = group_rank_size(group)
        hq = q.shape[1]
        qf = q.float()
        out = torch.zeros_like(qf)
        lse = torch.full(q.shape[:-1], float("-inf"), dtype=torch.float32, device=q.device)
        k_cur, v_cur = k, v
        for step in range(size):
            pending = ring_exchange_start([k_cur, v_cur], group, layer) if step < size - 1 else None
            mask = mask_for((rank - step) % size)
            if not _skip(mask):
                out_b, lse_b = _block_forward(qf, expand_kv(k_cur.float(), hq), expand_kv(v_cur.float(), hq), mask, scale)
                out, lse = _merge(out, lse, out_b, lse_b)
            if pending is not None:
                k_cur, v_cur = pending()
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.group, ctx.mask_for, ctx.scale, ctx.layer = group, mask_for, scale, layer
        return out.to(q.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        group, scale, layer = ctx.group, ctx.scale, ctx.layer
        rank, size = group_rank_size(group)
        hq, hkv = q.shape[1], k.shape[1]
        qf, do = q.float(), grad_out.float()
        delta = (do * out).sum(-1, keepdim=True)  # rowsum(dO * O), (B, H, Sq, 1)
        lse_safe = _finite_or_zero(lse)[..., None]
        dq = torch.zeros_like(qf)
        k_cur, v_cur = k, v
        dk_cur = torch.zeros(k.shape, dtype=torch.float32, device=k.device)
        dv_cur = torch.zeros(v.shape, dtype=torch.float32, device=v.device)
        for step in range(size):
            pending_kv = ring_exchange_start([k_cur, v_cur], group, layer) if step < size - 1 else None
            mask = ctx.mask_for((rank - step) % size)
            if not _skip(mask):
                kx, vx = expand_kv(k_cur.float(), hq), expand_kv(v_cur.float(), hq)
                p = torch.exp(_scores(qf, kx, mask, scale) - lse_safe)  # (B, H, Sq, Sk)
                dv_cur = dv_cur + reduce_kv_grad(torch.matmul(p.transpose(-1, -2), do), hkv)
                ds = p * (torch.matmul(do, vx.transpose(-1, -2)) - delta)
                dq = dq + torch.matmul(ds, kx) * scale
                dk_cur = dk_cur + reduce_kv_grad(torch.matmul(ds.transpose(-1, -2), qf) * scale, hkv)
            if pending_kv is not None:
                k_cur, v_cur = pending_kv()
            if size > 1:
                # The accumulator follows its block; after the last hop it is home. Posted only
                # after the K/V hop completed, so two batches never race for the same peer pair.
                dk_cur, dv_cur = ring_exchange_start([dk_cur, dv_cur], group, layer)()
        return dq.to(q.dtype), dk_cur.to(k.dtype), dv_cur.to(v.dtype), None, None, None, None
