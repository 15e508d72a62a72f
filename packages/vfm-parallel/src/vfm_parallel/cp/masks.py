"""Which query may attend which key, from global token positions: the one rule every CP path shares.

Positions are indices into the whole (unsharded) t-major sequence, index = (t * H' + h) * W' + w.
Spatial attention stays within a frame, temporal attention within a patch position, packed
(``cu_seqlens``) samples never see each other, and ``key_padding_mask`` (True = attend) drops keys.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

GROUPED_KINDS = ("spatial", "temporal")


def group_of(positions: torch.Tensor, kind: str, grid: tuple[int, int, int]) -> torch.Tensor:
    """The attention group of each position: its frame (spatial) or its patch position (temporal)."""
    hw = grid[1] * grid[2]
    if kind == "spatial":
        return positions // hw
    if kind == "temporal":
        return positions % hw
    raise ValueError(f"only {GROUPED_KINDS} attention has groups, got {kind!r}")


def grids_of(grid) -> list[tuple[int, int, int]]:
    """The per-sample grids of ``grid``: one (T', H', W'), or a tuple of them for a packed batch."""
    return [tuple(grid)] if isinstance(grid[0], int) else [tuple(g) for g in grid]


def grid_tokens(grid) -> int:
    """Tokens in the whole sequence described by ``grid`` (summed over packed samples)."""
    return sum(t * h * w for t, h, w in grids_of(grid))


def group_ids(kind: str, grid, device: torch.device | str | None = None) -> torch.Tensor:
    """(S,) group id of every position of the whole sequence, on ``device``; packed samples get
    distinct ids (a sample has T' spatial groups, H' x W' temporal ones: counted, not read back)."""
    ids, offset = [], 0
    for g in grids_of(grid):
        ids.append(group_of(torch.arange(g[0] * g[1] * g[2], device=device), kind, g) + offset)
        offset += g[0] if kind == "spatial" else g[1] * g[2]
    return torch.cat(ids)


def ranges_meet(kind: str, grid, q_range: tuple[int, int], k_range: tuple[int, int]) -> bool:
    """Whether some query at a position in ``q_range`` (start, stop) may attend some key in ``k_range``
    by the rule of :func:`block_mask` for ``kind`` (full, spatial, temporal) over ``grid``, whose
    packed samples never meet. Arithmetic on the grid's ints: no tensor is read, so a ring can skip
    blocks without waiting for a device. Key padding is not looked at (it never makes a block meet)."""
    if kind not in ("full", *GROUPED_KINDS):  # before any range is looked at: disjoint ones answered False
        raise ValueError(f"ranges_meet takes full, spatial or temporal attention, got {kind!r}")
    offset = 0
    for t, h, w in grids_of(grid):
        n, hw = t * h * w, h * w
        qa, qb = max(q_range[0] - offset, 0), min(q_range[1] - offset, n)
        ka, kb = max(k_range[0] - offset, 0), min(k_range[1] - offset, n)
        offset += n
        if qa >= qb or ka >= kb:
            continue
        if kind == "full":
            return True
        if kind == "spatial" and qa // hw <= (kb - 1) // hw and ka // hw <= (qb - 1) // hw:  # a frame in common
            return True
        if kind == "temporal" and _intervals_meet(_residues(qa, qb, hw), _residues(ka, kb, hw)):
            return True
    return False


def _residues(start: int, stop: int, n: int) -> list[tuple[int, int]]:
    """The values of range(start, stop) modulo n (patch positions), as half-open intervals."""
    if stop - start >= n:
        return [(0, n)]
    lo, hi = start % n, start % n + (stop - start)
    return [(lo, hi)] if hi <= n else [(lo, n), (0, hi - n)]


def _intervals_meet(xs, ys) -> bool:
    return any(a < d and c < b for a, b in xs for c, d in ys)


def segment_of(positions: torch.Tensor, cu_seqlens: torch.Tensor) -> torch.Tensor:
    """The packed sample each position belongs to (positions past the last boundary share one)."""
    return torch.searchsorted(cu_seqlens[1:].to(torch.long), positions, right=True)


def block_mask(
    q_pos: torch.Tensor,
    k_pos: torch.Tensor,
    *,
    groups: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
    key_padding: torch.Tensor | None = None,
) -> torch.Tensor | None:
    """Boolean mask (1 or B, 1, Sq, Sk), True = attend, for queries at ``q_pos`` and keys at
    ``k_pos``; None when everything may attend everything. ``groups`` is :func:`group_ids` for
    spatial/temporal attention; ``key_padding`` is (B, Sk)."""
    mask = None
    if groups is not None:
        mask = groups[q_pos][:, None] == groups[k_pos][None, :]
    if cu_seqlens is not None:
        same = segment_of(q_pos, cu_seqlens)[:, None] == segment_of(k_pos, cu_seqlens)[None, :]
        mask = same if mask is None else mask & same
    if mask is not None:
        mask = mask[None, None]
    if key_padding is not None:
        keys = key_padding.to(torch.bool)[:, None, None, :]
        mask = keys if mask is None else mask & keys
    return mask


def expand_kv(x: torch.Tensor, num_q_heads: int) -> torch.Tensor:
    """(B, Hkv, S, Dh) -> (B, Hq, S, Dh) for grouped-query attention (each kv head serves Hq/Hkv)."""
    rep = num_q_heads // x.shape[1]
    return x if rep == 1 else x.repeat_interleave(rep, dim=1)


def reduce_kv_grad(g: torch.Tensor, num_kv_heads: int) -> torch.Tensor:
    """The inverse of :func:`expand_kv` for gradients: sum the query heads that shared a kv head."""
    b, hq, s, d = g.shape
    return g if hq == num_kv_heads else g.view(b, num_kv_heads, hq // num_kv_heads, s, d).sum(2)


def default_scale(head_dim: int, scale: float | None) -> float:
    return scale if scale is not None else 1.0 / math.sqrt(head_dim)


def local_attention(q, k, v, mask: torch.Tensor | None, scale: float | None = None) -> torch.Tensor:
    """softmax(q k^T * scale + mask) v on one rank; q (B, Hq, Sq, Dh), k, v (B, Hkv, Sk, Dh).

    A query row without any key gets zeros (the models' convention), not NaN.
    """
    k, v = expand_kv(k, q.shape[1]), expand_kv(v, q.shape[1])
    scale = default_scale(q.shape[-1], scale)
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, scale=scale)
    # Whether a row is empty depends on the key padding (data, not the grid): fill unconditionally,
    # since asking ``empty.any()`` first would wait for the device at every layer.
    empty = ~mask.any(-1, keepdim=True)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | empty, scale=scale)
    return out.masked_fill(empty, 0.0)
