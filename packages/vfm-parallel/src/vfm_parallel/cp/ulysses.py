"""All-to-all (Ulysses) attention: trade the sequence shard for a head shard, attend, trade back.

Before: every rank holds all heads of S/cp tokens, (B, H, S/cp, Dh). One all-to-all later it holds
H/cp heads of all S tokens, (B, H/cp, S, Dh), so any attention (full, spatial, temporal, packed,
masked) runs unchanged on the whole sequence; a second all-to-all brings the output back.
"""

from __future__ import annotations

from typing import Callable

import torch

from vfm_parallel.cp.comm import all_to_all, group_rank_size
from vfm_parallel.cp.masks import expand_kv

#: attend(q, k, v) on the whole sequence: (B, h, S, Dh) each -> (B, h, S, Dh)
Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def check_heads(num_q_heads: int, num_kv_heads: int, cp: int) -> None:
    if num_q_heads % cp:
        raise ValueError(
            f"all-to-all (Ulysses) attention splits heads over cp ranks: {num_q_heads} query heads are not "
            f"divisible by cp={cp}; use a head count divisible by cp, or ring attention (cp-ring)"
        )


def ulysses_attention(q, k, v, group, attend: Attend, *, layer: str = "cp.ulysses") -> torch.Tensor:
    """q (B, Hq, S/cp, Dh), k, v (B, Hkv, S/cp, Dh) -> (B, Hq, S/cp, Dh) via ``attend`` on all S tokens."""
    _, cp = group_rank_size(group)
    b, hq, s_local, dh = q.shape
    check_heads(hq, k.shape[1], cp)
    if k.shape[1] % cp:  # fewer kv heads than ranks: give each rank the kv heads its queries use
        k, v = expand_kv(k, hq), expand_kv(v, hq)
    hq_r, hkv_r = hq // cp, k.shape[1] // cp

    # One all-to-all for q, k and v: rank j receives head group j of every rank's tokens.
    send = [
        torch.cat([q[:, j * hq_r:(j + 1) * hq_r], k[:, j * hkv_r:(j + 1) * hkv_r], v[:, j * hkv_r:(j + 1) * hkv_r]], 1)
        for j in range(cp)
    ]
    recv = all_to_all(send, [(b, hq_r + 2 * hkv_r, s_local, dh)] * cp, group, layer)
    qkv = torch.cat(recv, dim=2)  # (B, hq_r + 2 hkv_r, S, Dh): sequence chunks in rank order
    q_full, k_full, v_full = qkv.split([hq_r, hkv_r, hkv_r], dim=1)

    out = attend(q_full, k_full, v_full)  # (B, hq_r, S, Dh)

    back = all_to_all(list(out.split(s_local, dim=2)), [(b, hq_r, s_local, dh)] * cp, group, layer)
    return torch.cat(back, dim=1)  # (B, Hq, S/cp, Dh)
