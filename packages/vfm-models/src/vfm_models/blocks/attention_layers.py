"""Self- and cross-attention layers: projections, per-head QK RMSNorm and RoPE around an ``AttentionCore``.

Head counts come from tensor shapes (``view(B, S, -1, head_dim)``), so tensor parallelism can shard
the q/k/v projections column-wise and the output projection row-wise without touching this code.
"""

from __future__ import annotations

import torch
from torch import nn

from vfm_models.blocks.attention import AttentionCore
from vfm_models.blocks.context import BlockContext
from vfm_models.blocks.norms import RMSNorm
from vfm_models.blocks.position import apply_rope


class _Attention(nn.Module):
    def __init__(self, hidden: int, kv_dim: int, num_heads: int, num_kv_heads: int, head_dim: int,
                 qk_norm: bool, kind: str, backend=None) -> None:
        super().__init__()
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
        self.head_dim = head_dim
        self.q = nn.Linear(hidden, num_heads * head_dim)
        self.k = nn.Linear(kv_dim, num_kv_heads * head_dim)
        self.v = nn.Linear(kv_dim, num_kv_heads * head_dim)
        self.o = nn.Linear(num_heads * head_dim, hidden)
        # per head, over head_dim: unchanged by head sharding
        self.q_norm = RMSNorm(head_dim, eps=1e-6) if qk_norm else nn.Identity()
        self.k_norm = RMSNorm(head_dim, eps=1e-6) if qk_norm else nn.Identity()
        self.core = AttentionCore(kind, backend)

    def _heads(self, x: torch.Tensor, proj: nn.Linear) -> torch.Tensor:
        return proj(x).unflatten(-1, (-1, self.head_dim))  # (B, S, h, Dh)

    def _qkv(self, x: torch.Tensor, kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q from ``x``, k and v from ``kv``, (B, S, h, Dh) each, q and k normalised (a family may
        normalise otherwise by overriding this alone)."""
        return self.q_norm(self._heads(x, self.q)), self.k_norm(self._heads(kv, self.k)), self._heads(kv, self.v)

    def _out(self, out: torch.Tensor) -> torch.Tensor:
        return self.o(out.transpose(1, 2).flatten(2))  # (B, h, S, Dh) -> (B, S, D)


class SelfAttention(_Attention):
    """Full, spatial or temporal self-attention over the token sequence (kind of its ``core``)."""

    def __init__(self, hidden: int, num_heads: int, num_kv_heads: int, head_dim: int, qk_norm: bool,
                 kind: str = "full", backend=None) -> None:
        super().__init__(hidden, hidden, num_heads, num_kv_heads, head_dim, qk_norm, kind, backend)

    def forward(self, x: torch.Tensor, ctx: BlockContext) -> torch.Tensor:
        q, k, v = self._qkv(x, x)
        if ctx.rope is not None:
            q, k = apply_rope(q, *ctx.rope), apply_rope(k, *ctx.rope)
        out = self.core(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
            grid=ctx.grid, cu_seqlens=ctx.cu_seqlens, max_seqlen=ctx.max_seqlen,
        )
        return self._out(out)


class CrossAttention(_Attention):
    """Tokens attend to text (B, L, D_text) with its padding mask; packed batches use text cu_seqlens."""

    def __init__(self, hidden: int, text_dim: int, num_heads: int, num_kv_heads: int, head_dim: int,
                 qk_norm: bool, backend=None) -> None:
        super().__init__(hidden, text_dim, num_heads, num_kv_heads, head_dim, qk_norm, "cross", backend)

    def forward(self, x: torch.Tensor, ctx: BlockContext) -> torch.Tensor:
        if ctx.text is None:
            raise ValueError("this model cross-attends to text: pass cond={'text': (B, L, D), 'text_mask': (B, L)}")
        q, k, v = self._qkv(x, ctx.text)
        out = self.core(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
            grid=ctx.grid, key_padding_mask=ctx.text_mask,
            cu_seqlens=ctx.cu_seqlens, max_seqlen=ctx.max_seqlen,
            cu_seqlens_k=ctx.text_cu_seqlens, max_seqlen_k=ctx.text_max_seqlen,
        )
        return self._out(out)
