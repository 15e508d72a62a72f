"""Feed-forward layers: GELU (DiT) and SwiGLU (Llama / MovieGen). Names follow Megatron TP pairs."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

MLP_KINDS = ("gelu", "swiglu")


def ffn_dim(hidden: int, ratio: float, kind: str) -> int:
    """Inner width: ratio*D for GELU; 2/3 of that, rounded up to a multiple of 64, for SwiGLU (Llama)."""
    if kind == "swiglu":
        return -(-int(2 * ratio * hidden / 3) // 64) * 64
    return int(ratio * hidden)


class GeluMLP(nn.Module):
    def __init__(self, hidden: int, inner: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(hidden, inner)  # colwise
        self.fc2 = nn.Linear(inner, hidden)  # rowwise

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class SwiGLU(nn.Module):
    def __init__(self, hidden: int, inner: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(hidden, inner, bias=False)  # gate, colwise
        self.w3 = nn.Linear(hidden, inner, bias=False)  # up, colwise
        self.w2 = nn.Linear(inner, hidden, bias=False)  # down, rowwise

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


def make_mlp(kind: str, hidden: int, ratio: float) -> nn.Module:
    if kind not in MLP_KINDS:
        raise ValueError(f"mlp must be one of {', '.join(MLP_KINDS)}; got {kind!r}")
    inner = ffn_dim(hidden, ratio, kind)
    return SwiGLU(hidden, inner) if kind == "swiglu" else GeluMLP(hidden, inner)


def mlp_tp_plan(kind: str, prefix: str = "mlp") -> dict:
    """Which MLP linears are column- and row-parallel."""
    if kind == "swiglu":
        return {f"{prefix}.w1": "colwise", f"{prefix}.w3": "colwise", f"{prefix}.w2": "rowwise"}
    return {f"{prefix}.fc1": "colwise", f"{prefix}.fc2": "rowwise"}
