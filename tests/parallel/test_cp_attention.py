"""Ring, all-to-all (Ulysses) and group all-to-all attention equal unsharded attention, forward and
backward, in real gloo process groups (cp = 2 and 4): GQA, key padding masks, packed batches.

The reference is vfm-models' own ``AttentionCore`` on the whole sequence (and, for spatial/temporal
attention with a padding mask, which that core does not take, the same regrouping written out here).
"""

from __future__ import annotations

import pytest
import torch

from tests.gloo import spawn

# (name, method, kind, batch, q heads, kv heads, grid, key padding?, packed grids)
GRID = (4, 2, 3)  # S = 24 tokens: 12 per rank at cp=2, 6 at cp=4
PACKED_FULL = ((1, 1, 5), (2, 2, 2), (1, 1, 11))  # 5 + 8 + 11: samples straddle rank boundaries
PACKED_ST = ((2, 2, 2), (2, 2, 4))  # 8 + 16
CASES = [
    ("ring-full-gqa", "ring", "full", 2, 4, 2, GRID, False, None),
    ("ring-full-padding", "ring", "full", 2, 4, 4, GRID, True, None),
    ("ring-full-packed", "ring", "full", 1, 4, 2, None, False, PACKED_FULL),
    ("ring-spatial", "ring", "spatial", 2, 4, 2, GRID, False, None),
    ("ring-temporal-padding", "ring", "temporal", 2, 4, 4, GRID, True, None),
    ("ring-spatial-packed", "ring", "spatial", 1, 4, 4, None, False, PACKED_ST),
    ("ring-temporal-packed", "ring", "temporal", 1, 4, 4, None, False, PACKED_ST),
    ("ulysses-full-gqa", "ulysses", "full", 2, 4, 2, GRID, False, None),
    ("ulysses-full-padding", "ulysses", "full", 2, 4, 4, GRID, True, None),
    ("ulysses-full-packed", "ulysses", "full", 1, 4, 4, None, False, PACKED_FULL),
    ("ulysses-temporal", "ulysses", "temporal", 2, 4, 4, GRID, False, None),
    ("ulysses-spatial-packed", "ulysses", "spatial", 1, 4, 4, None, False, PACKED_ST),
    ("group-spatial", "group", "spatial", 2, 4, 2, GRID, False, None),
    ("group-temporal-padding", "group", "temporal", 2, 4, 4, GRID, True, None),
    ("group-spatial-padding", "group", "spatial", 2, 4, 4, GRID, True, None),
    # shards that cut frames: ranks exchange unequal token counts (pairwise, not gloo's all_to_all)
    ("group-temporal-split-frames", "group", "temporal", 2, 4, 4, (3, 2, 2), False, None),
    # frames (t=3) or positions not divisible by cp: groups dealt over (batch, group)
    ("group-spatial-uneven", "group", "spatial", 4, 4, 4, (3, 2, 2), False, None),
    ("group-temporal-uneven", "group", "temporal", 4, 4, 4, (4, 3, 1), False, None),
]
DH = 8


def _padding(batch, grid):
    """(B, S) True = attend; drops one column of every odd frame (each frame and each position keeps keys)."""
    t, h, w = grid
    tt = torch.arange(t)[:, None, None].expand(t, h, w).reshape(-1)
    ww = torch.arange(w)[None, None, :].expand(t, h, w).reshape(-1)
    return torch.stack([~((tt % 2 == 1) & (ww == b % w)) for b in range(batch)])


def _regrouped_reference(q, k, v, kind, grid, mask):
    """Spatial/temporal attention with a key padding mask, regrouped by hand."""
    from vfm_models.blocks.backends import attend

    t, h, w = grid
    b, heads = q.shape[:2]

    def group(x):  # (B, h, S, Dh) -> (B*T, h, HW, Dh) | (B*HW, h, T, Dh)
        x = x.unflatten(2, (t, h * w))
        return x.transpose(1, 2).flatten(0, 1) if kind == "spatial" else x.permute(0, 3, 1, 2, 4).flatten(0, 1)

    m = mask.view(b, t, h * w)
    m = m.flatten(0, 1) if kind == "spatial" else m.transpose(1, 2).flatten(0, 1)
    out = attend(group(q), group(k), group(v), key_padding_mask=m)
    if kind == "spatial":
        out = out.unflatten(0, (b, t)).transpose(1, 2)
    else:
        out = out.unflatten(0, (b, h * w)).permute(0, 2, 3, 1, 4)
    return out.reshape(b, out.shape[1], t * h * w, -1)


def _run_cases(rank, world):
    import torch.distributed as dist
    from vfm_models.blocks.attention import AttentionCore

    from vfm_parallel.cp import ContextParallelCore

    group = dist.group.WORLD
    diffs = {}
    for i, (name, method, kind, b, hq, hkv, grid, padded, packed) in enumerate(CASES):
        gen = torch.Generator().manual_seed(1000 + i)  # the same tensors on every rank
        if packed:
            grid = packed
            lengths = torch.tensor([0] + [t * h * w for t, h, w in packed])
            cu = lengths.cumsum(0).to(torch.int32)
        else:
            cu = None
        s = sum(t * h * w for t, h, w in (packed or [grid]))
        q = torch.randn(b, hq, s, DH, generator=gen, requires_grad=True)
        k = torch.randn(b, hkv, s, DH, generator=gen, requires_grad=True)
        v = torch.randn(b, hkv, s, DH, generator=gen, requires_grad=True)
        w_out = torch.randn(b, hq, s, DH, generator=gen)  # loss = sum(out * w_out)
        mask = _padding(b, grid) if padded else None
        max_seqlen = int((cu[1:] - cu[:-1]).max()) if cu is not None else None

        inner = AttentionCore(kind)
        if mask is not None and kind != "full":
            ref = _regrouped_reference(q, k, v, kind, grid, mask)
        else:
            ref = inner(q, k, v, grid=grid, key_padding_mask=mask, cu_seqlens=cu, max_seqlen=max_seqlen)
        (ref * w_out).sum().backward()

        n = s // world
        part = slice(rank * n, (rank + 1) * n)
        ql, kl, vl = (x.detach()[:, :, part].clone().requires_grad_() for x in (q, k, v))
        core = ContextParallelCore(inner, kind, group, method)
        out = core(ql, kl, vl, grid=grid, key_padding_mask=None if mask is None else mask[:, part],
                   cu_seqlens=cu, max_seqlen=max_seqlen)
        (out * w_out[:, :, part]).sum().backward()
        diffs[name] = {
            "out": (out - ref[:, :, part]).abs().max().item(),
            "dq": (ql.grad - q.grad[:, :, part]).abs().max().item(),
            "dk": (kl.grad - k.grad[:, :, part]).abs().max().item(),
            "dv": (vl.grad - v.grad[:, :, part]).abs().max().item(),
        }
    return diffs


@pytest.mark.parametrize("cp", [2, 4])
def test_ring_ulysses_and_group_attention_forward_and_backward_match_full_attention(cp):
    results = spawn(_run_cases, cp)
    worst = {name: max(max(r[name].values()) for r in results) for name, *_ in CASES}
    print(f"\ncp={cp} largest |CP - full| over out, dq, dk, dv:", {k: f"{v:.1e}" for k, v in worst.items()})
    bad = {name: d for name, d in worst.items() if not d < 1e-5}
    assert not bad, f"CP attention differs from full attention at cp={cp}: {bad}"
