"""Transformer blocks: the adaLN-Zero DiT block (optionally with cross-attention) and the ST-DiT block."""

from __future__ import annotations

import torch
from torch import nn

from vfm_models.blocks.adaln import AdaLN, modulate, per_token
from vfm_models.blocks.attention_layers import CrossAttention, SelfAttention
from vfm_models.blocks.context import BlockContext
from vfm_models.blocks.mlp import make_mlp
from vfm_models.blocks.norms import make_norm


def _gated(x: torch.Tensor, gate: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + per_token(gate) * y


class DiTBlock(nn.Module):
    """[modulated norm -> self-attn -> gate] [norm -> cross-attn] [modulated norm -> MLP -> gate].

    ``cfg`` is a family config (``vfm_models.families.config.TransformerConfig``); cross-attention is
    present when ``cfg.text_dim > 0``.
    """

    chunks = 6

    def __init__(self, cfg, index: int = 0) -> None:
        super().__init__()
        D = cfg.hidden
        self.norm1 = make_norm(cfg.norm, D, affine=False)
        self.attn = SelfAttention(D, cfg.num_heads, cfg.kv_heads, cfg.head_dim, cfg.qk_norm, "full", cfg.attention_backend)
        if cfg.text_dim:
            self.norm_cross = make_norm(cfg.norm, D)
            self.cross_attn = CrossAttention(
                D, cfg.text_dim, cfg.num_heads, cfg.kv_heads, cfg.head_dim, cfg.qk_norm, cfg.attention_backend
            )
        self.norm2 = make_norm(cfg.norm, D, affine=False, eps=cfg.mlp_norm_eps)
        self.mlp = make_mlp(cfg.mlp, D, cfg.mlp_ratio)
        self.adaln = AdaLN(D, self.chunks, cfg.adaln_lora_rank)

    def forward(self, x: torch.Tensor, ctx: BlockContext) -> torch.Tensor:
        shift1, scale1, gate1, shift2, scale2, gate2 = self.adaln(ctx.c, ctx.mod, ctx.token_sample)
        x = _gated(x, gate1, self.attn(modulate(self.norm1(x), shift1, scale1), ctx))
        if hasattr(self, "cross_attn"):
            x = x + self.cross_attn(self.norm_cross(x), ctx)
        return _gated(x, gate2, self.mlp(modulate(self.norm2(x), shift2, scale2)))


class STDiTBlock(nn.Module):
    """Spatial self-attn, temporal self-attn, cross-attn and MLP, each a residual; three adaLN-Zero triples.

    In the blocks listed in ``cfg.full_attention_blocks`` the first attention (``spatial_attn``) attends
    over the whole sequence (its core has kind ``full``).
    """

    chunks = 9

    def __init__(self, cfg, index: int = 0) -> None:
        super().__init__()
        D = cfg.hidden
        first = "full" if index in cfg.full_attention_blocks else "spatial"
        args = (D, cfg.num_heads, cfg.kv_heads, cfg.head_dim, cfg.qk_norm)
        self.norm1 = make_norm(cfg.norm, D, affine=False)
        self.spatial_attn = SelfAttention(*args, first, cfg.attention_backend)
        self.norm_t = make_norm(cfg.norm, D, affine=False)
        self.temporal_attn = SelfAttention(*args, "temporal", cfg.attention_backend)
        self.norm_cross = make_norm(cfg.norm, D)
        self.cross_attn = CrossAttention(D, cfg.text_dim, cfg.num_heads, cfg.kv_heads, cfg.head_dim, cfg.qk_norm,
                                         cfg.attention_backend)
        self.norm2 = make_norm(cfg.norm, D, affine=False)
        self.mlp = make_mlp(cfg.mlp, D, cfg.mlp_ratio)
        self.adaln = AdaLN(D, self.chunks, cfg.adaln_lora_rank)

    def forward(self, x: torch.Tensor, ctx: BlockContext) -> torch.Tensor:
        s1, sc1, g1, st, sct, gt, s2, sc2, g2 = self.adaln(ctx.c, ctx.mod, ctx.token_sample)
        x = _gated(x, g1, self.spatial_attn(modulate(self.norm1(x), s1, sc1), ctx))
        x = _gated(x, gt, self.temporal_attn(modulate(self.norm_t(x), st, sct), ctx))
        x = x + self.cross_attn(self.norm_cross(x), ctx)
        return _gated(x, g2, self.mlp(modulate(self.norm2(x), s2, sc2)))
