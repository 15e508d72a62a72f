"""A small DiT that follows the model contract (docs/contracts.md section 1) exactly.

It stands in for the real families so that the parallel tests do not depend on their details:
patch embed -> timestep + class embedders -> AdaLN blocks (separate q/k/v, per-head QK RMSNorm,
GELU MLP) -> AdaLN final layer + unpatchify. Tests run the real families as well when present.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from vfm_models.blocks.attention import AttentionCore
from vfm_models.blocks.context import BlockContext
from vfm_models.families import ParallelPlan


def modulate(x, shift, scale):
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.head_dim = dim // heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, kv_heads * self.head_dim)
        self.v = nn.Linear(dim, kv_heads * self.head_dim)
        self.q_norm = nn.RMSNorm(self.head_dim)
        self.k_norm = nn.RMSNorm(self.head_dim)
        self.core = AttentionCore("full")
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, ctx: BlockContext):  # (B, S, D) -> (B, S, D)
        q, k, v = self.q(x), self.k(x), self.v(x)
        B, S = q.shape[:2]  # from the projection: under SP the input holds only a sequence shard
        q = self.q_norm(q.view(B, S, -1, self.head_dim)).transpose(1, 2)
        k = self.k_norm(k.view(B, S, -1, self.head_dim)).transpose(1, 2)
        v = v.view(B, S, -1, self.head_dim).transpose(1, 2)
        out = self.core(q, k, v, grid=ctx.grid)  # (B, Hq, S, Dh)
        return self.proj(out.transpose(1, 2).reshape(B, S, -1))


class Mlp(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, kv_heads)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False)
        self.mlp = Mlp(dim)
        self.ada = nn.Linear(dim, 6 * dim)

    def forward(self, x, ctx: BlockContext):
        s1, g1, a1, s2, g2, a2 = self.ada(F.silu(ctx.c)).chunk(6, dim=-1)
        x = x + a1.unsqueeze(1) * self.attn(modulate(self.norm1(x), s1, g1), ctx)
        return x + a2.unsqueeze(1) * self.mlp(modulate(self.norm2(x), s2, g2))


class FinalLayer(nn.Module):
    def __init__(self, dim: int, out: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim, elementwise_affine=False)
        self.ada = nn.Linear(dim, 2 * dim)
        self.linear = nn.Linear(dim, out)

    def forward(self, x, c):
        shift, scale = self.ada(F.silu(c)).chunk(2, dim=-1)
        return self.linear(modulate(self.norm(x), shift, scale))


class TimestepEmbedder(nn.Module):
    def __init__(self, dim: int, freq: int = 32) -> None:
        super().__init__()
        self.freq = freq
        self.mlp = nn.Sequential(nn.Linear(freq, dim), nn.SiLU(), nn.Linear(dim, dim))

    def forward(self, t):  # (B,) -> (B, D)
        half = self.freq // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
        args = t[:, None].float() * freqs[None]
        return self.mlp(torch.cat([torch.cos(args), torch.sin(args)], dim=-1))


class ToyDiT(nn.Module):
    """``ToyDiT(channels=4, dim=32, depth=4, heads=4, kv_heads=2, patch=2, classes=10)``."""

    def __init__(self, channels=4, dim=32, depth=4, heads=4, kv_heads=2, patch=2, classes=10) -> None:
        super().__init__()
        self.channels, self.patch, self.heads, self.kv_heads = channels, patch, heads, kv_heads
        self.x_embedder = nn.Linear(channels * patch * patch, dim)
        self.t_embedder = TimestepEmbedder(dim)
        self.y_embedder = nn.Embedding(classes, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, kv_heads) for _ in range(depth))
        self.final_layer = FinalLayer(dim, channels * patch * patch)

    def embed(self, x):  # (B, C, T, H, W) -> (B, T*H'*W', D), grid
        B, C, T, H, W = x.shape
        p = self.patch
        grid = (T, H // p, W // p)
        x = x.reshape(B, C, T, H // p, p, W // p, p).permute(0, 2, 3, 5, 1, 4, 6)
        return self.x_embedder(x.reshape(B, T * grid[1] * grid[2], C * p * p)), grid

    def context(self, grid, t, cond) -> BlockContext:
        return BlockContext(c=self.t_embedder(t) + self.y_embedder(cond["y"]), grid=grid)

    def head(self, tokens, ctx: BlockContext):
        B, p, (T, h, w) = tokens.shape[0], self.patch, ctx.grid
        x = self.final_layer(tokens, ctx.c).reshape(B, T, h, w, self.channels, p, p)
        return x.permute(0, 4, 1, 2, 5, 3, 6).reshape(B, self.channels, T, h * p, w * p)

    def forward(self, x, t, cond):
        tokens, grid = self.embed(x)
        ctx = self.context(grid, t, cond)
        for block in self.blocks:
            tokens = block(tokens, ctx)
        return self.head(tokens, ctx)

    def parallel_plan(self) -> ParallelPlan:
        return ParallelPlan(
            blocks="blocks",
            tp={"attn.q": "colwise", "attn.k": "colwise", "attn.v": "colwise", "attn.proj": "rowwise",
                "mlp.fc1": "colwise", "mlp.fc2": "rowwise"},
            attention={"attn.core": "full"},
            conditioning=("t_embedder", "y_embedder"),
            pre_blocks=("x_embedder",),
            post_blocks=("final_layer",),
            num_heads=self.heads,
            num_kv_heads=self.kv_heads,
            num_layers=len(self.blocks),
        )


def toy_batch(batch=4, channels=4, frames=2, size=4, classes=10, seed=0):
    """(x, t, cond, target) for ToyDiT: latents (B, C, T, H, W), noise levels, labels, a target."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, channels, frames, size, size, generator=g)
    t = torch.rand(batch, generator=g)
    y = torch.randint(0, classes, (batch,), generator=g)
    target = torch.randn(batch, channels, frames, size, size, generator=g)
    return x, t, {"y": y}, target
