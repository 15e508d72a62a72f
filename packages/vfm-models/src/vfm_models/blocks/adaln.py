"""AdaLN-Zero modulation and AdaLN-LoRA (a shared term from the timestep plus a low-rank per-block term).

AdaLN-LoRA replaces each block's (D -> n*D) modulation Linear by D -> r -> n*D and adds one shared
(D -> n*D) term computed once per step from the timestep embedding (the seeds' 1.2x optimisation).
"""

from __future__ import annotations

from typing import List, Optional

import torch
import torch.nn.functional as F
from torch import nn


def per_token(v: torch.Tensor) -> torch.Tensor:
    """(B, D) per-sample vectors broadcast over the sequence as (B, 1, D); (B, S, D) stays per token."""
    return v.unsqueeze(1) if v.dim() == 2 else v


def modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x (B, S, D) * (1 + scale) + shift; shift/scale (B, D) or (B, S, D)."""
    return x * (1 + per_token(scale)) + per_token(shift)


class AdaLN(nn.Module):
    """c (B, D) -> ``chunks`` modulation vectors; zero-initialised so each block starts as identity."""

    def __init__(self, hidden: int, chunks: int, lora_rank: int = 0) -> None:
        super().__init__()
        self.chunks = chunks
        self.lora_rank = lora_rank
        if lora_rank:
            self.down = nn.Linear(hidden, lora_rank, bias=False)
            self.up = nn.Linear(lora_rank, chunks * hidden, bias=False)
            nn.init.zeros_(self.up.weight)
        else:
            self.linear = nn.Linear(hidden, chunks * hidden)
            nn.init.zeros_(self.linear.weight)
            nn.init.zeros_(self.linear.bias)

    def forward(self, c: torch.Tensor, shared: Optional[torch.Tensor] = None,
                token_sample: Optional[torch.Tensor] = None) -> List[torch.Tensor]:
        """c (B, D) -> ``chunks`` vectors (B, D); with ``token_sample`` (1, S) (packed batches: c has
        one row per sample) each is gathered per token, (1, S, D): the linear runs once per sample."""
        h = F.silu(c)
        out = self.up(self.down(h)) if self.lora_rank else self.linear(h)
        if shared is not None:
            out = out + shared
        if token_sample is not None:
            # index_select: its backward is one index_add (an advanced-indexing gather's backward is
            # a sort-based kernel, measured at 100 ms per 8k-token step of a 30-block model)
            out = out.index_select(0, token_sample[0])[None]
        return list(out.chunk(self.chunks, dim=-1))


class AdaLNShared(nn.Module):
    """The AdaLN-LoRA term shared by all blocks: c (B, D) -> (B, n*D), computed once (a conditioning embedder)."""

    def __init__(self, hidden: int, chunks: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden, chunks * hidden)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, c: torch.Tensor) -> torch.Tensor:
        return self.linear(F.silu(c))
