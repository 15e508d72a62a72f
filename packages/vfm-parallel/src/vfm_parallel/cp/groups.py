"""Spatial and temporal attention by all-to-all and local compute (the hybrid of seed table 2).

Spatial attention works within each frame and temporal attention along time at each patch
position, so both split into independent *groups*. One all-to-all hands each rank whole groups —
temporal: (b*h*w/cp, t, d), spatial: (b*t/cp, h*w, d) — the rank attends locally (data parallel
over groups) and a second all-to-all returns the output to the sequence shards.

Groups are dealt per sample when their count divides by cp (rank r gets groups r*G/cp..(r+1)*G/cp
of every sample), else over the flattened (batch, group) index. Per sample, a t-major sequence
shard already *is* whole frames when t % cp == 0, and the spatial exchange then moves nothing and
is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.distributed as dist

from vfm_parallel.cp.comm import all_to_all, group_rank_size
from vfm_parallel.cp.masks import group_of, local_attention


def _groups(kind: str, grid: tuple[int, int, int]) -> tuple[int, int]:
    """(groups per sample, tokens per group)."""
    t, hw = grid[0], grid[1] * grid[2]
    return (t, hw) if kind == "spatial" else (hw, t)


def check_groups(kind: str, batch: int, grid: tuple[int, int, int], cp: int) -> None:
    """Raise if the groups of ``kind`` cannot be dealt evenly to ``cp`` ranks."""
    num_groups, _ = _groups(kind, grid)
    if num_groups % cp and (batch * num_groups) % cp:
        what = "frames t" if kind == "spatial" else "patch positions h*w"
        raise ValueError(
            f"{kind} attention by all-to-all deals whole groups to cp={cp} ranks, but neither the {what} = "
            f"{num_groups} of grid {tuple(grid)} nor batch*{what} = {batch}*{num_groups} = {batch * num_groups} "
            f"is divisible by {cp}; choose sizes divisible by cp, or ring attention (cp-ring)"
        )


@dataclass(frozen=True)
class GroupLayout:
    """Who sends which token where, for one (kind, batch, grid, cp, rank)."""

    send_idx: tuple[torch.Tensor, ...]  # per destination rank: flat indices into this rank's (B*S/cp)
    recv_counts: tuple[int, ...]  # per source rank: tokens received
    to_grouped: torch.Tensor  # received (in source-rank order) -> (groups_local * L) grouped order
    to_recv_order: torch.Tensor  # grouped order -> received order (inverse of to_grouped)
    to_local: torch.Tensor  # returned (in destination-rank order) -> this rank's (B*S/cp) order
    groups_local: int
    group_len: int
    moves_nothing: bool  # every token stays on its rank: skip the collectives


def _owner(kind, batch, grid, cp, source):
    """For every token of rank ``source`` in (b, s) order: (owner rank, flat index in the owner's grouped layout)."""
    num_groups, group_len = _groups(kind, grid)
    s_local = grid[0] * grid[1] * grid[2] // cp
    pos = torch.arange(source * s_local, (source + 1) * s_local).repeat(batch)
    b = torch.arange(batch).repeat_interleave(s_local)
    g = group_of(pos, kind, grid)
    in_group = pos // (grid[1] * grid[2]) if kind == "temporal" else pos % (grid[1] * grid[2])
    if num_groups % cp == 0:
        per_rank = num_groups // cp
        owner, local_group = g // per_rank, b * per_rank + g % per_rank
    else:
        flat, per_rank = b * num_groups + g, batch * num_groups // cp
        owner, local_group = flat // per_rank, flat % per_rank
    return owner, local_group * group_len + in_group


@lru_cache(maxsize=64)
def group_layout(kind: str, batch: int, grid: tuple[int, int, int], cp: int, rank: int) -> GroupLayout:
    check_groups(kind, batch, grid, cp)
    num_groups, group_len = _groups(kind, grid)
    owners = [_owner(kind, batch, grid, cp, source) for source in range(cp)]
    my_owner, _ = owners[rank]
    send_idx = tuple(torch.nonzero(my_owner == j).flatten() for j in range(cp))
    # What arrives here from each source, in that source's send order, and where it belongs.
    dest = torch.cat([slot[owner == rank] for owner, slot in owners])
    to_grouped = torch.argsort(dest)
    moves_nothing = all(bool((owner == source).all()) for source, (owner, _) in enumerate(owners))
    return GroupLayout(
        send_idx=send_idx,
        recv_counts=tuple(int((owner == rank).sum()) for owner, _ in owners),
        to_grouped=to_grouped,
        to_recv_order=torch.argsort(to_grouped),
        to_local=torch.argsort(torch.cat(send_idx)),
        groups_local=len(dest) // group_len,
        group_len=group_len,
        moves_nothing=moves_nothing,
    )


def _exchange(x, send_idx, recv_counts, group, layer, moves_nothing):
    """Rows ``x[send_idx[j]]`` to rank j; returns the rows received, in source-rank order."""
    if moves_nothing:
        return x[send_idx[dist.get_rank(group)]]
    send = [x[idx] for idx in send_idx]
    recv = all_to_all(send, [(n, *x.shape[1:]) for n in recv_counts], group, layer)
    return torch.cat(recv)


def _exchange_mask(mask, layout: GroupLayout, group, layer):
    """The key padding mask travels with its tokens (no gradient: a raw float all-to-all)."""
    with torch.no_grad():
        rows = _exchange(mask.reshape(-1, 1).float(), layout.send_idx, layout.recv_counts, group, layer, layout.moves_nothing)
    return rows[layout.to_grouped].view(layout.groups_local, layout.group_len) > 0.5


def group_attention(q, k, v, group, *, kind: str, grid, key_padding_mask=None, scale=None, layer: str = "cp.group"):
    """Spatial or temporal attention of sequence shards by all-to-all + local attention.

    q (B, Hq, S/cp, Dh), k, v (B, Hkv, S/cp, Dh) of a t-major sequence over ``grid``; returns
    (B, Hq, S/cp, Dh). ``key_padding_mask`` is this rank's (B, S/cp) shard.
    """
    rank, cp = group_rank_size(group)
    b, hq, s_local, dh = q.shape
    hkv = k.shape[1]
    layout = group_layout(kind, b, tuple(int(n) for n in grid), cp, rank)

    # Token-major rows (B*S/cp, (Hq + 2 Hkv) * Dh): one exchange carries q, k and v together.
    rows = torch.cat([x.permute(0, 2, 1, 3).reshape(b * s_local, -1) for x in (q, k, v)], dim=1)
    rows = _exchange(rows, layout.send_idx, layout.recv_counts, group, layer, layout.moves_nothing)
    grouped = rows[layout.to_grouped].view(layout.groups_local, layout.group_len, hq + 2 * hkv, dh)
    qg, kg, vg = grouped.permute(0, 2, 1, 3).split([hq, hkv, hkv], dim=1)  # (G_local, h, L, Dh)

    mask = None
    if key_padding_mask is not None:
        mask = _exchange_mask(key_padding_mask, layout, group, layer)[:, None, None, :]
    out = local_attention(qg, kg, vg, mask, scale)  # (G_local, Hq, L, Dh)

    # Back: grouped -> received order -> to the ranks the tokens came from -> local (b, s) order.
    out_rows = out.permute(0, 2, 1, 3).reshape(-1, hq * dh)[layout.to_recv_order]
    if layout.moves_nothing:
        back = out_rows
    else:
        chunks = list(out_rows.split(list(layout.recv_counts)))
        back = torch.cat(all_to_all(chunks, [(len(i), hq * dh) for i in layout.send_idx], group, layer))
    local = back[layout.to_local]
    return local.view(b, s_local, hq, dh).permute(0, 2, 1, 3)
