"""Patch-token arithmetic and sequence packing (pure functions, used by the task encoder).

Tokens are ordered t-major over the patch grid, index = (t * H' + h) * W' + w (docs/contracts.md),
and each token's vector is the patch flattened as (C, pt, ph, pw), the layout of a Conv3d patch
embedding's weight, so ``patches @ conv.weight.flatten(1).T`` equals the convolution.
"""

from __future__ import annotations

import torch


def patch_grid(shape: tuple[int, ...], patch: int, temporal_patch: int = 1) -> tuple[int, int, int]:
    """(T', H', W') patches of a (C, T, H, W) latent; a remainder that does not fill a patch is cropped."""
    _, t, h, w = shape
    grid = (t // temporal_patch, h // patch, w // patch)
    if min(grid) < 1:
        raise ValueError(f"latent (T, H, W) = {(t, h, w)} is smaller than one patch ({temporal_patch}, {patch}, {patch})")
    return grid


def crop_to_tokens(
    latent: torch.Tensor, max_tokens: int, patch: int, temporal_patch: int = 1
) -> torch.Tensor:
    """Crop a (C, T, H, W) latent to at most ``max_tokens`` patches: fewer frames first, then rows."""
    t, h, w = patch_grid(tuple(latent.shape), patch, temporal_patch)
    if h * w <= max_tokens:
        t = min(t, max_tokens // (h * w))
    else:  # a single frame is too large: keep one frame, crop rows (centre)
        if w > max_tokens:
            raise ValueError(f"one row of {w} patches exceeds max_seq_len {max_tokens}; cannot crop")
        t, new_h = 1, max_tokens // w
        top = (h - new_h) // 2
        latent = latent[:, :, top * patch : (top + new_h) * patch]
        h = new_h
    return latent[:, : t * temporal_patch, : h * patch, : w * patch]


def patchify(latent: torch.Tensor, patch: int, temporal_patch: int = 1) -> torch.Tensor:
    """(C, T, H, W) -> (T'*H'*W', C*pt*p*p), t-major token order."""
    c = latent.shape[0]
    t, h, w = patch_grid(tuple(latent.shape), patch, temporal_patch)
    x = latent[:, : t * temporal_patch, : h * patch, : w * patch]
    x = x.reshape(c, t, temporal_patch, h, patch, w, patch)
    x = x.permute(1, 3, 5, 0, 2, 4, 6)  # (T', H', W', C, pt, p, p)
    return x.reshape(t * h * w, c * temporal_patch * patch * patch)


def grid_positions(grid: tuple[int, int, int]) -> torch.Tensor:
    """(T'*H'*W', 3) long: the (t, h, w) patch coordinate of each token, for 3D RoPE."""
    t, h, w = grid
    coords = torch.stack(torch.meshgrid(torch.arange(t), torch.arange(h), torch.arange(w), indexing="ij"), -1)
    return coords.reshape(-1, 3)


def select_packs(lengths: list[int], capacity: int) -> list[list[int]]:
    """Best-fit decreasing bin packing: indices grouped so each group's total is <= ``capacity``.

    Every index is placed (energon drops samples a pre-packer leaves out); each length must fit.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    bins: list[list[int]] = []
    free: list[int] = []
    for i in order:
        n = lengths[i]
        if n > capacity:
            raise ValueError(f"sample of {n} tokens exceeds the pack capacity {capacity}")
        best, best_free = -1, capacity + 1
        for b, f in enumerate(free):
            if n <= f < best_free:
                best, best_free = b, f
        if best < 0:
            bins.append([i])
            free.append(capacity - n)
        else:
            bins[best].append(i)
            free[best] -= n
    return bins


def cu_seqlens(lengths: list[int]) -> torch.Tensor:
    """(N+1,) int32 cumulative offsets, the THD layout of varlen attention kernels."""
    out = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    out[1:] = torch.cumsum(torch.tensor(lengths, dtype=torch.int64), 0)
    return out
