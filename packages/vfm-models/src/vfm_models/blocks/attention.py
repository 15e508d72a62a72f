"""The softmax(QK^T)V part of every attention layer: ``AttentionCore`` (see docs/contracts.md, section 1).

Layers compute projections, QK-norm and RoPE themselves and call their child ``core``. A
context-parallel strategy swaps ``core`` for its own module with the same signature. Spatial and
temporal cores receive the full t-major sequence plus ``grid`` and regroup it themselves.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from vfm_models.blocks.backends import attend
from vfm_models.blocks.context import GridSpec, per_sample_grids

KINDS = ("full", "spatial", "temporal", "cross")


class AttentionCore(nn.Module):
    """``core(q, k, v, grid=..., key_padding_mask=None, cu_seqlens=None, max_seqlen=None)``.

    q (B, Hq, Sq, Dh); k, v (B, Hkv, Sk, Dh) (GQA when Hkv < Hq) -> (B, Hq, Sq, Dh).
    Packed cross-attention also passes ``cu_seqlens_k``/``max_seqlen_k`` (the text boundaries).
    """

    def __init__(self, kind: str = "full", backend: Optional[str] = None) -> None:
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"attention kind must be one of {', '.join(KINDS)}; got {kind!r}")
        self.kind = kind
        self.backend = backend

    def extra_repr(self) -> str:
        return f"kind={self.kind}"

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        grid: Optional[GridSpec] = None,
        key_padding_mask: Optional[torch.Tensor] = None,
        cu_seqlens: Optional[torch.Tensor] = None,
        max_seqlen: Optional[int] = None,
        cu_seqlens_k: Optional[torch.Tensor] = None,
        max_seqlen_k: Optional[int] = None,
    ) -> torch.Tensor:
        if self.kind in ("full", "cross"):
            return attend(
                q, k, v, key_padding_mask=key_padding_mask, cu_seqlens_q=cu_seqlens, cu_seqlens_k=cu_seqlens_k,
                max_seqlen_q=max_seqlen, max_seqlen_k=max_seqlen_k, backend=self.backend,
            )
        if grid is None:
            raise ValueError(f"a {self.kind} attention core needs the patch grid (T', H', W')")
        grids = per_sample_grids(grid)
        if grids is None:
            return self._factorized(q, k, v, grid)  # type: ignore[arg-type]
        # packed: each sample has its own grid; regroup sample by sample
        bounds = cu_seqlens.tolist() if cu_seqlens is not None else None
        if bounds is None or len(bounds) != len(grids) + 1:
            raise ValueError("a packed spatial/temporal core needs cu_seqlens with one entry per grid")
        outs = [
            self._factorized(q[:, :, a:b], k[:, :, a:b], v[:, :, a:b], g)
            for a, b, g in zip(bounds[:-1], bounds[1:], grids)
        ]
        return torch.cat(outs, dim=2)

    def _factorized(self, q, k, v, grid) -> torch.Tensor:
        T, H, W = grid
        B, S = q.shape[0], q.shape[2]
        if S != T * H * W:
            raise ValueError(f"{self.kind} attention got {S} tokens but the grid {tuple(grid)} holds {T * H * W}")

        def group(x):  # (B, h, T*H*W, Dh) -> (B*T, h, H*W, Dh) or (B*H*W, h, T, Dh)
            x = x.unflatten(2, (T, H * W))  # (B, h, T, HW, Dh)
            if self.kind == "spatial":
                return x.transpose(1, 2).flatten(0, 1)
            return x.permute(0, 3, 1, 2, 4).flatten(0, 1)

        out = attend(group(q), group(k), group(v), backend=self.backend)
        heads, dh = out.shape[1], out.shape[3]
        if self.kind == "spatial":
            out = out.unflatten(0, (B, T)).transpose(1, 2)  # (B, h, T, HW, Dh)
        else:
            out = out.unflatten(0, (B, H * W)).permute(0, 2, 3, 1, 4)  # (B, h, T, HW, Dh)
        return out.reshape(B, heads, S, dh)
