"""The attention core a CP strategy puts in place of a model's own: same call, sequence shards in.

A model's attention layer calls ``core(q, k, v, grid=, key_padding_mask=, cu_seqlens=, max_seqlen=)``
(docs/contracts.md section 1). Under context parallelism q/k/v hold this rank's S/cp tokens,
``grid`` is the whole sequence's grid, ``key_padding_mask`` is this rank's (B, S/cp) shard and
``cu_seqlens`` describes the whole packed sequence. The core runs one of four methods:

- ``ring``: ring attention over P2P (full, or spatial/temporal as a masked ring),
- ``ulysses``: head all-to-all, then the model's own core on the whole sequence,
- ``group``: spatial/temporal groups dealt by all-to-all and attended locally,
- ``local``: cross-attention, whose keys (text) are replicated: queries stay sharded, no traffic.
"""

from __future__ import annotations

import torch
from torch import nn

from vfm_parallel.cp.comm import gather_no_grad, group_rank_size
from vfm_parallel.cp.groups import group_attention
from vfm_parallel.cp.masks import block_mask, grid_tokens, group_ids, ranges_meet
from vfm_parallel.cp.ring import ring_attention
from vfm_parallel.cp.ulysses import ulysses_attention

METHODS = ("ring", "ulysses", "group", "local")
SELF_ATTENTION_KINDS = ("full", "spatial", "temporal")


class ContextParallelCore(nn.Module):
    """Wraps a model's attention core (kept as ``inner``) and runs it context-parallel."""

    def __init__(self, inner: nn.Module, kind: str, group, method: str):
        super().__init__()
        if method not in METHODS:
            raise ValueError(f"unknown CP attention method {method!r}; methods: {', '.join(METHODS)}")
        if method == "local" and kind != "cross":
            raise ValueError(f"only cross-attention may stay local under CP; {kind!r} attention needs ring, ulysses or group")
        if method == "group" and kind not in ("spatial", "temporal"):
            raise ValueError(f"group all-to-all serves spatial and temporal attention, not {kind!r}")
        self.inner, self.kind, self.group, self.method = inner, kind, group, method
        self.layer = f"cp.{kind}"

    def extra_repr(self) -> str:
        return f"kind={self.kind}, method={self.method}"

    def forward(self, q, k, v, grid=None, key_padding_mask=None, cu_seqlens=None, max_seqlen=None, **kwargs):
        """``kwargs`` (``cu_seqlens_k``, ``max_seqlen_k`` of packed text) go to the model's core."""
        if self.method == "local":
            return self._cross(q, k, v, grid, key_padding_mask, cu_seqlens, kwargs)
        rank, cp = group_rank_size(self.group)
        s_local = q.shape[2]
        if grid is not None and grid_tokens(grid) != s_local * cp:
            raise ValueError(
                f"{self.kind} attention got {s_local} tokens on each of cp={cp} ranks ({s_local * cp} in all) "
                f"but grid {tuple(grid)} has {grid_tokens(grid)}"
            )
        if self.kind != "full" and grid is None:
            raise ValueError(f"{self.kind} attention under CP needs the global grid (T', H', W')")
        scale = getattr(self.inner, "scale", None)
        if self.method == "group":
            if cu_seqlens is not None:
                raise ValueError(
                    f"{self.kind} attention by all-to-all (cp-hybrid) does not take packed batches (cu_seqlens); "
                    "use cp-ring or cp-ulysses for packed sequences"
                )
            return group_attention(q, k, v, self.group, kind=self.kind, grid=grid, key_padding_mask=key_padding_mask, scale=scale, layer=self.layer)
        full_mask = None if key_padding_mask is None else gather_no_grad(key_padding_mask, 1, self.group, self.layer)
        if self.method == "ulysses":
            def attend(qf, kf, vf):
                return self.inner(qf, kf, vf, grid=grid, key_padding_mask=full_mask, cu_seqlens=cu_seqlens, max_seqlen=max_seqlen, **kwargs)

            return ulysses_attention(q, k, v, self.group, attend, layer=self.layer)

        # positions and groups on q's device: the masks they make meet the scores there (CUDA)
        q_pos = torch.arange(rank * s_local, (rank + 1) * s_local, device=q.device)
        groups = group_ids(self.kind, grid, q.device) if self.kind != "full" else None

        def mask_for(source: int):
            k_pos = torch.arange(source * s_local, (source + 1) * s_local, device=q.device)
            keys = None if full_mask is None else full_mask[:, source * s_local:(source + 1) * s_local]
            return block_mask(q_pos, k_pos, groups=groups, cu_seqlens=cu_seqlens, key_padding=keys)

        attends = None  # without a grid (dense full attention) every block is computed
        if grid is not None and (self.kind != "full" or cu_seqlens is not None):
            def attends(source: int) -> bool:  # from the grid's ints: no device sync per hop
                return ranges_meet(self.kind, grid, (rank * s_local, (rank + 1) * s_local),
                                   (source * s_local, (source + 1) * s_local))

        return ring_attention(q, k, v, self.group, mask_for=mask_for, attends=attends, scale=scale, layer=self.layer)

    def _cross(self, q, k, v, grid, key_padding_mask, cu_seqlens, kwargs):
        """Text keys are whole on every rank; packed query boundaries move into this rank's window."""
        max_seqlen = None
        if cu_seqlens is not None:
            rank, _ = group_rank_size(self.group)
            s_local = q.shape[2]
            cu_seqlens = (cu_seqlens.to(torch.long) - rank * s_local).clamp(0, s_local).to(cu_seqlens.dtype)
            max_seqlen = int((cu_seqlens[1:] - cu_seqlens[:-1]).max())
        return self.inner(q, k, v, grid=grid, key_padding_mask=key_padding_mask, cu_seqlens=cu_seqlens,
                          max_seqlen=max_seqlen, **kwargs)
