"""What every transformer block receives besides its tokens: conditioning, RoPE tables, layout.

A context-parallel strategy shards the sequence; :meth:`BlockContext.map_tokens` lets it shard every
per-token field with the same function, without knowing which fields a family uses.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, Tuple, Union

import torch

Grid = Tuple[int, int, int]
#: One grid (T', H', W') for a plain batch; one grid per sample for a packed batch.
GridSpec = Union[Grid, Tuple[Grid, ...]]


@dataclass(frozen=True)
class BlockContext:
    """The conditioning and layout handed to every block (see docs/contracts.md section 1).

    Per-token tensors (``rope`` cos/sin, ``c``/``mod`` when 3-D) keep the sequence in dimension 1.
    """

    #: Conditioning embedding: (B, D_c) per sample (for packed batches, one row per packed sample).
    c: torch.Tensor
    #: RoPE (cos, sin), each (1, S, Dh/2) (one angle per rotated pair), or None without RoPE.
    rope: Optional[Tuple[torch.Tensor, torch.Tensor]] = None
    #: Patch grid (T', H', W') of the whole unsharded sequence; a tuple of grids for packed batches.
    grid: Optional[GridSpec] = None
    #: Text tokens (B, L, D_text); for packed batches the real tokens of all samples, (1, sum L_i, D_text).
    text: Optional[torch.Tensor] = None
    #: (B, L) bool, True = real token. None for packed batches (they carry no padding).
    text_mask: Optional[torch.Tensor] = None
    #: (N+1,) int32 sample boundaries of a packed sequence (THD), else None.
    cu_seqlens: Optional[torch.Tensor] = None
    max_seqlen: Optional[int] = None
    #: AdaLN-LoRA shared modulation term from the timestep embedding, (B, n*D) or (B, S, n*D); else None.
    mod: Optional[torch.Tensor] = None
    #: (N+1,) int32 boundaries of each sample's text inside ``text`` for packed batches, else None.
    text_cu_seqlens: Optional[torch.Tensor] = None
    text_max_seqlen: Optional[int] = None
    #: (1, S) long, packed batches only: the sample of each token. Blocks compute their modulation
    #: once per sample from ``c`` / ``mod`` and gather it per token with this index.
    token_sample: Optional[torch.Tensor] = None

    @property
    def packed(self) -> bool:
        return self.cu_seqlens is not None

    def map_tokens(self, fn: Callable[[torch.Tensor, int], torch.Tensor]) -> "BlockContext":
        """A new context with ``fn(tensor, dim)`` applied to each per-token tensor along its sequence dim."""
        changes = {}
        if self.rope is not None:
            changes["rope"] = tuple(fn(t, 1) for t in self.rope)
        if self.token_sample is not None:
            changes["token_sample"] = fn(self.token_sample, 1)
        return dataclasses.replace(self, **changes)

    def replace(self, **changes) -> "BlockContext":
        return dataclasses.replace(self, **changes)


def per_sample_grids(grid: Optional[GridSpec]) -> Optional[Sequence[Grid]]:
    """The list of per-sample grids of a packed batch, or None for a single (unpacked) grid."""
    if grid is None or isinstance(grid[0], int):
        return None
    return grid  # type: ignore[return-value]
