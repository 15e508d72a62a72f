"""Positions on the (T', H', W') patch grid: 3D RoPE factorized over t, h, w, 3D sin-cos embeddings,
and DiT's 2-D sin-cos table (for converted image DiTs)."""

from __future__ import annotations

from typing import Sequence, Tuple

import torch


def grid_positions(grid: Sequence[int], device=None) -> torch.Tensor:
    """(S, 3) integer (t, h, w) of each token, t-major: index = (t * H' + h) * W' + w."""
    T, H, W = grid
    t, h, w = torch.meshgrid(
        torch.arange(T, device=device), torch.arange(H, device=device), torch.arange(W, device=device), indexing="ij"
    )
    return torch.stack([t.flatten(), h.flatten(), w.flatten()], dim=1)


def _axis_pairs(n_pairs: int) -> Tuple[int, int, int]:
    """Rotated pairs per axis: h and w get a third each, t the rest (as in Cosmos' 3D RoPE)."""
    hw = n_pairs // 3
    return n_pairs - 2 * hw, hw, hw


def rope_3d(grid: Sequence[int], head_dim: int, theta: float = 10000.0, device=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin), each (S, head_dim/2): one angle per rotated pair, pairs split over t, h, w."""
    if head_dim % 2 or head_dim < 6:
        raise ValueError(f"3D RoPE needs an even head_dim >= 6, got {head_dim}")
    pos = grid_positions(grid, device).to(torch.float64)
    angles = []
    for axis, pairs in enumerate(_axis_pairs(head_dim // 2)):
        freqs = theta ** (-torch.arange(pairs, device=device, dtype=torch.float64) / pairs)
        angles.append(pos[:, axis : axis + 1] * freqs)
    angle = torch.cat(angles, dim=1).to(torch.float32)
    return angle.cos(), angle.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x[2i], x[2i+1]) of x (B, S, H, Dh) by per-token angles; cos/sin (1 or B, S, Dh/2)."""
    x2 = x.float().unflatten(-1, (-1, 2))
    x0, x1 = x2[..., 0], x2[..., 1]
    c, s = cos[:, :, None, :], sin[:, :, None, :]  # broadcast over heads
    out = torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1)
    return out.flatten(-2).to(x.dtype)


def _sincos_1d(pos: torch.Tensor, dim: int) -> torch.Tensor:
    omega = 1.0 / 10000 ** (torch.arange(dim // 2, dtype=torch.float64, device=pos.device) / (dim // 2))
    out = pos.to(torch.float64)[:, None] * omega[None]
    return torch.cat([out.sin(), out.cos()], dim=1)


def sincos_3d(grid: Sequence[int], dim: int, device=None) -> torch.Tensor:
    """(S, dim) fixed sin-cos position embedding (DiT/MAE), dimensions split over t, h, w."""
    hw = (dim // 3) // 2 * 2
    dt = dim - 2 * hw
    if dim % 2 or hw == 0:
        raise ValueError(f"3D sin-cos embeddings need an even dim >= 6, got {dim}")
    pos = grid_positions(grid, device)
    emb = torch.cat([_sincos_1d(pos[:, 0], dt), _sincos_1d(pos[:, 1], hw), _sincos_1d(pos[:, 2], hw)], dim=1)
    return emb.to(torch.float32)


def sincos_2d(grid: Sequence[int], dim: int, device=None) -> torch.Tensor:
    """(S, dim) DiT's 2-D sin-cos table (facebookresearch/DiT and diffusers ``get_2d_sincos_pos_embed``)
    on a one-frame grid (1, H', W'): the first half of the dimensions encodes the column w, the
    second half the row h (DiT's meshgrid puts w first), each as [sin | cos]."""
    T, H, W = grid
    if T != 1:
        raise ValueError(f"the 2-D sin-cos table (pos_embed 'sincos2d', DiT's) is for images: it takes one latent "
                         f"frame, got a grid of {T} frames; use pos_embed 'sincos' or 'rope' for video")
    if dim % 4:
        raise ValueError(f"2-D sin-cos embeddings need a dim divisible by 4, got {dim}")
    pos = grid_positions(grid, device)
    return torch.cat([_sincos_1d(pos[:, 2], dim // 2), _sincos_1d(pos[:, 1], dim // 2)], dim=1).to(torch.float32)
