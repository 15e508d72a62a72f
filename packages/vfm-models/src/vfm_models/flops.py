"""FLOP counts of the families: exact matmul FLOPs per token, and the 6N + 12 L h S convention for MFU.

``flops_per_token`` walks the model (it works on the meta device, so 7B/28B presets cost nothing) and
counts every Linear and every attention product: Linears applied per latent token, per sample
(timestep/class embedders, AdaLN modulation) or per text token (cross-attention keys/values, wan's
text projection), and
attention by the kind of its core (full S^2, spatial T'(H'W')^2, temporal H'W'T'^2, cross S*L).
Forward + backward = 3x forward (each matmul's backward is two matmuls of the same size).
"""

from __future__ import annotations

from typing import Optional, Sequence

from torch import nn

from vfm_models.blocks.attention import AttentionCore

#: Module name parts whose Linears run once per sample (on the conditioning vector), not per token.
PER_SAMPLE = ("t_embedder", "y_embedder", "adaln")
#: Module names whose Linears run once per text token (wan's caption projection before cross-attention).
PER_TEXT_TOKEN = ("text_embedder",)


def _linear_flops(model: nn.Module, tokens: int, text_tokens: int) -> int:
    total = 0
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        parts = name.split(".")
        if any(p.startswith(PER_SAMPLE) for p in parts):
            rows = 1
        elif len(parts) >= 2 and parts[-2] == "cross_attn" and parts[-1] in ("k", "v"):
            rows = text_tokens
        elif any(p in PER_TEXT_TOKEN for p in parts):
            rows = text_tokens
        else:
            rows = tokens
        total += 2 * rows * module.in_features * module.out_features
    return total


def _attention_flops(model: nn.Module, grid: Sequence[int], text_tokens: int) -> int:
    T, H, W = grid
    S = T * H * W
    total = 0
    for name, module in model.named_modules():
        if not isinstance(module, AttentionCore):
            continue
        layer = model.get_submodule(name.rsplit(".", 1)[0])
        width = layer.q.out_features  # Hq * Dh
        pairs = {  # query-key pairs per sample
            "full": S * S,
            "spatial": T * (H * W) ** 2,
            "temporal": H * W * T**2,
            "cross": S * text_tokens,
        }[module.kind]
        total += 4 * pairs * width  # QK^T and AV, 2 FLOPs per multiply-add each
    return total


def forward_flops(model: nn.Module, grid: Sequence[int], text_len: int = 0) -> int:
    """Matmul FLOPs of one forward pass of one sample with patch grid (T', H', W') and ``text_len`` text tokens."""
    if text_len == 0 and getattr(getattr(model, "config", None), "text_dim", 0):
        raise ValueError("this model cross-attends to text: pass text_len > 0")
    T, H, W = grid
    S = T * H * W
    return _linear_flops(model, S, text_len) + _attention_flops(model, grid, text_len)


def flops_per_token(model: nn.Module, grid: Sequence[int], text_len: int = 0) -> float:
    """Training (forward + backward) matmul FLOPs per latent token for one sample of patch grid ``grid``."""
    T, H, W = grid
    return 3 * forward_flops(model, grid, text_len) / (T * H * W)


def model_flops_per_token(num_params: int, num_layers: int, hidden: int, seq_len: int) -> float:
    """The DiT training-FLOPs convention of docs/design.md section 6: 6 N + 12 L h S per token.

    This is the figure the published throughput tables use (it charges every parameter to every token),
    so MFU computed with it is comparable with theirs.
    """
    return 6.0 * num_params + 12.0 * num_layers * hidden * seq_len


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def mfu(tokens_per_second: float, flops_per_tok: float, peak_flops: float, num_devices: Optional[int] = 1) -> float:
    """Model FLOPs utilisation: achieved FLOP/s per device over the device's peak FLOP/s."""
    return tokens_per_second * flops_per_tok / (peak_flops * (num_devices or 1))
