"""The final layer: modulated norm -> linear to patch pixels (zero-initialised, as in DiT)."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from vfm_models.blocks.adaln import AdaLN, modulate
from vfm_models.blocks.norms import make_norm


class FinalLayer(nn.Module):
    def __init__(self, hidden: int, patch_dim: int, norm: str = "layer") -> None:
        super().__init__()
        self.norm = make_norm(norm, hidden, affine=False)
        self.adaln = AdaLN(hidden, 2)
        self.linear = nn.Linear(hidden, patch_dim)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, x: torch.Tensor, c: torch.Tensor, token_sample: Optional[torch.Tensor] = None) -> torch.Tensor:
        shift, scale = self.adaln(c, token_sample=token_sample)
        return self.linear(modulate(self.norm(x), shift, scale))  # (B, S, pt*ph*pw*C)
