"""The loss reduction shared by the formulations: a weighted mean over elements, with an optional mask."""

from __future__ import annotations

import torch


def masked_sample_mean(err: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mean of ``err`` (B, ...) over all but the batch dim -> (B,), counting only where ``mask`` is true.

    ``mask`` broadcasts to ``err`` (e.g. (B, 1, T, 1, 1) marks the real frames of padded videos).
    A sample whose mask is all false contributes 0 (not NaN).
    """
    if mask is None:
        return err.flatten(1).mean(1)
    try:
        m = torch.broadcast_to(mask.to(err.dtype), err.shape)
    except RuntimeError:
        raise ValueError(
            f"loss mask of shape {tuple(mask.shape)} does not broadcast to the data shape {tuple(err.shape)}; "
            "use (B, C|1, T|1, H|1, W|1)"
        ) from None
    return (err * m).flatten(1).sum(1) / m.flatten(1).sum(1).clamp_min(1)


def reduce(per_sample: torch.Tensor, reduction: str) -> torch.Tensor:
    """``"mean"`` -> scalar, ``"none"`` -> the (B,) per-sample losses."""
    if reduction == "mean":
        return per_sample.mean()
    if reduction == "none":
        return per_sample
    raise ValueError(f"reduction must be 'mean' or 'none', got {reduction!r}")


def per_sample(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A (B,) or scalar level broadcast to (B, 1, 1, ...) against ``like`` (B, C, T, H, W)."""
    values = torch.as_tensor(values, dtype=torch.float32, device=like.device)
    if values.dim() == 0:
        values = values.expand(like.shape[0])
    if values.shape != like.shape[:1]:
        raise ValueError(f"noise level must be a scalar or shape ({like.shape[0]},), got {tuple(values.shape)}")
    return values.reshape(-1, *([1] * (like.dim() - 1)))
