"""The Wan-only layers: QK RMSNorm over all heads, the per-block modulation table, the block and the head.

Wan differs from ``dit-cross`` in four places: its q/k RMSNorm spans the whole hidden width (all
heads together) rather than each head; the cross-attention keys/values project from the text after a
text MLP (width D, not the encoder's width); each block's six modulation vectors are a learned table
plus one (B, 6D) term shared by all blocks (``time_proj``); and the final layer's shift/scale are a
table plus the timestep embedding itself.
"""

from __future__ import annotations

from typing import List, Optional

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from vfm_models.blocks.adaln import modulate, per_token
from vfm_models.blocks.attention_layers import CrossAttention, SelfAttention
from vfm_models.blocks.context import BlockContext
from vfm_models.blocks.mlp import GeluMLP
from vfm_models.blocks.norms import make_norm


class _SumOverGroup(torch.autograd.Function):
    """All-reduce (sum) whose backward sums the gradients too: every rank's output feeds its own
    loss path, so the input's gradient is the sum of all ranks' output gradients."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        ctx.group = group
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class RMSNormAcrossHeads(nn.Module):
    """RMSNorm of q or k over all heads (B, S, h, Dh) -> same shape: Wan's ``rms_norm_across_heads``.

    Under tensor parallelism a rank holds h/tp heads; the mean square then needs the other ranks'
    heads too, so it is summed over the TP group (``tp_mesh``), and each rank uses its slice of the
    weight (the TP strategy sums the replicated weight's per-rank gradients: the slices add up).
    """

    def __init__(self, width: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor, tp_mesh=None) -> torch.Tensor:
        flat = x.flatten(-2)  # (B, S, h*Dh)
        width = self.weight.shape[0]
        if flat.shape[-1] == width:
            out = F.rms_norm(flat, (width,), self.weight.to(x.dtype), self.eps)
            return out.view_as(x)
        if tp_mesh is None or flat.shape[-1] * tp_mesh.size() != width:
            raise ValueError(f"q/k of width {flat.shape[-1]} do not match the norm's width {width}")
        xf = flat.float()
        square_sum = _SumOverGroup.apply(xf.square().sum(-1, keepdim=True), tp_mesh.get_group())
        weight = self.weight.chunk(tp_mesh.size())[tp_mesh.get_local_rank()]
        out = xf * torch.rsqrt(square_sum / width + self.eps) * weight.float()
        return out.to(x.dtype).view_as(x)


def _tp_mesh(linear: nn.Linear):
    """The TP mesh of a column-parallel linear (its weight is then a DTensor), else None."""
    mesh = getattr(linear.weight, "device_mesh", None)
    if mesh is not None and mesh.ndim > 1:
        mesh = mesh["tp"]
    return mesh


class _AcrossHeads:
    """Swaps the per-head q/k norms of vfm's attention layers for RMSNormAcrossHeads."""

    def _use_norms(self, width: int, eps: float) -> None:
        self.q_norm = RMSNormAcrossHeads(width, eps)
        self.k_norm = RMSNormAcrossHeads(width, eps)

    def _qkv(self, x: torch.Tensor, kv: torch.Tensor):
        mesh = _tp_mesh(self.q)
        q = self.q_norm(self._heads(x, self.q), mesh)
        k = self.k_norm(self._heads(kv, self.k), mesh)
        return q, k, self._heads(kv, self.v)


class WanSelfAttention(_AcrossHeads, SelfAttention):
    """vfm's self-attention (RoPE, packed batches, TP) with Wan's q/k norms."""

    def __init__(self, hidden: int, num_heads: int, eps: float, backend=None) -> None:
        SelfAttention.__init__(self, hidden, num_heads, num_heads, hidden // num_heads, False, "full", backend)
        self._use_norms(hidden, eps)


class WanCrossAttention(_AcrossHeads, CrossAttention):
    """Keys and values from the projected text (width ``hidden``), no padding mask unless the context has one."""

    def __init__(self, hidden: int, num_heads: int, eps: float, backend=None) -> None:
        CrossAttention.__init__(self, hidden, hidden, num_heads, num_heads, hidden // num_heads, False, backend)
        self._use_norms(hidden, eps)


class TextProjection(nn.Module):
    """Text (B, L, D_text) -> (B, L, D): Linear, GELU (tanh), Linear (PixArt-alpha's caption projection)."""

    def __init__(self, text_dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(text_dim, hidden)
        self.fc2 = nn.Linear(hidden, hidden)

    def forward(self, text: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(text), approximate="tanh"))


class ModulationTable(nn.Module):
    """``n`` modulation vectors = a learned (1, n, D) table + a conditioning term (B, n, D) or (B, 1, D)."""

    def __init__(self, hidden: int, chunks: int) -> None:
        super().__init__()
        self.chunks = chunks
        self.table = nn.Parameter(torch.randn(1, chunks, hidden) / hidden**0.5)

    def forward(self, term: torch.Tensor, token_sample: Optional[torch.Tensor] = None) -> List[torch.Tensor]:
        """-> ``chunks`` vectors (B, D); packed batches (``token_sample`` (1, S)) gather them per token, (1, S, D)."""
        out = self.table.float() + term.float()  # (B, n, D); Wan adds in fp32
        if token_sample is not None:
            out = out.index_select(0, token_sample[0])[None]  # (1, S, n, D)
        return list(out.unbind(-2))


def _norm(hidden: int, eps: float, affine: bool = False) -> nn.Module:
    return make_norm("layer", hidden, affine=affine, eps=eps)


def _gated(x: torch.Tensor, gate: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x.float() + per_token(gate) * y).to(x.dtype)


class WanBlock(nn.Module):
    """[modulated LN -> self-attn -> gate] [affine LN -> cross-attn] [modulated LN -> GELU MLP -> gate].

    ``ctx.mod`` is the shared (B, 6D) timestep term (Wan's ``time_proj``); ``ctx.text`` the projected text.
    """

    chunks = 6

    def __init__(self, cfg, index: int = 0) -> None:
        super().__init__()
        D = cfg.hidden
        self.norm1 = _norm(D, cfg.eps)
        self.attn = WanSelfAttention(D, cfg.num_heads, cfg.eps, cfg.attention_backend)
        self.norm_cross = _norm(D, cfg.eps, affine=True)
        self.cross_attn = WanCrossAttention(D, cfg.num_heads, cfg.eps, cfg.attention_backend)
        self.norm2 = _norm(D, cfg.eps)
        self.mlp = GeluMLP(D, cfg.ffn_dim)
        self.adaln = ModulationTable(D, self.chunks)

    def forward(self, x: torch.Tensor, ctx: BlockContext) -> torch.Tensor:
        term = ctx.mod.unflatten(-1, (self.chunks, -1))  # (B, 6, D)
        shift1, scale1, gate1, shift2, scale2, gate2 = self.adaln(term, ctx.token_sample)
        x = _gated(x, gate1, self.attn(modulate(self.norm1(x), shift1, scale1).to(x.dtype), ctx))
        x = x + self.cross_attn(self.norm_cross(x), ctx)
        return _gated(x, gate2, self.mlp(modulate(self.norm2(x), shift2, scale2).to(x.dtype)))


class WanFinalLayer(nn.Module):
    """LN modulated by a (1, 2, D) table + the timestep embedding c -> Linear to patch pixels."""

    def __init__(self, hidden: int, patch_dim: int, eps: float) -> None:
        super().__init__()
        self.norm = _norm(hidden, eps)
        self.adaln = ModulationTable(hidden, 2)
        self.linear = nn.Linear(hidden, patch_dim)

    def forward(self, x: torch.Tensor, c: torch.Tensor, token_sample: Optional[torch.Tensor] = None) -> torch.Tensor:
        shift, scale = self.adaln(c.unsqueeze(1), token_sample)
        return self.linear(modulate(self.norm(x), shift, scale).to(x.dtype))  # (B, S, pt*ph*pw*C)
