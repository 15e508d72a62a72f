"""Decode latents with a registered tokenizer in temporal chunks and overlapping spatial tiles, so
long or large videos fit in memory; tiles are blended with linear ramps where they overlap.

A tokenizer (``vfm_models`` kind ``tokenizers``) has ``decode(latent (B, C', T', H', W')) -> pixels
(B, C, T, H, W)`` and ``spatial_compression`` / ``temporal_compression`` factors.
"""

from __future__ import annotations

import torch


def _ramp(n: int, overlap: int, at_start: bool, at_end: bool, device: torch.device) -> torch.Tensor:
    """(n,) weights on ``device``: 1 inside, rising linearly over ``overlap`` at an interior start/end edge."""
    w = torch.ones(n, dtype=torch.float32, device=device)
    if overlap > 0:
        ramp = (torch.arange(overlap, dtype=torch.float32, device=device) + 1) / (overlap + 1)
        if not at_start:
            w[:overlap] = torch.minimum(w[:overlap], ramp)
        if not at_end:
            w[n - overlap :] = torch.minimum(w[n - overlap :], ramp.flip(0))
    return w


def _decoded(tokenizer, latent: torch.Tensor) -> torch.Tensor:
    """``tokenizer.decode(latent)``, refusing what is not a tensor with an error naming the tokenizer."""
    from vfm_models.tokenizers.contract import checked_tensor

    return checked_tensor(tokenizer.decode(latent), tokenizer, "decode")


def _starts(size: int, tile: int, overlap: int) -> list[int]:
    if tile >= size:
        return [0]
    step = tile - overlap
    starts = list(range(0, size - tile, step)) + [size - tile]
    return sorted(set(starts))


def decode_tiled(tokenizer, latent: torch.Tensor, tile: int | None = None, overlap: int = 2) -> torch.Tensor:
    """Decode (B, C', T', H', W') in spatial tiles of ``tile`` x ``tile`` latent pixels that overlap by
    ``overlap``; ``tile=None`` decodes in one pass."""
    b, _, _, h, w = latent.shape
    if tile is None or (tile >= h and tile >= w):
        return _decoded(tokenizer, latent)
    if not 0 <= overlap < tile:
        raise ValueError(f"tile overlap must be in [0, tile); got overlap {overlap} for tile {tile}")
    f = tokenizer.spatial_compression
    out = weight = None
    for y in _starts(h, tile, overlap):
        for x in _starts(w, tile, overlap):
            th, tw = min(tile, h - y), min(tile, w - x)
            pixels = _decoded(tokenizer, latent[..., y : y + th, x : x + tw]).float()
            if out is None:
                out = pixels.new_zeros((*pixels.shape[:3], h * f, w * f))
                weight = pixels.new_zeros((h * f, w * f))
            wy = _ramp(th * f, overlap * f, y == 0, y + th == h, pixels.device)  # the tiles' device (CUDA)
            wx = _ramp(tw * f, overlap * f, x == 0, x + tw == w, pixels.device)
            mask = wy[:, None] * wx[None, :]
            out[..., y * f : (y + th) * f, x * f : (x + tw) * f] += pixels * mask
            weight[y * f : (y + th) * f, x * f : (x + tw) * f] += mask
    return out / weight


def decode(
    tokenizer,
    latent: torch.Tensor,
    *,
    chunk_frames: int | None = None,
    context_frames: int = 1,
    tile: int | None = None,
    overlap: int | None = None,
) -> torch.Tensor:
    """Decode latents chunk by chunk along time (``chunk_frames`` latent frames at a time) and tile by
    tile in space; returns pixels (B, C, T, H, W) in float32 on the latent's device.

    ``overlap``: latent pixels shared by neighbouring tiles; by default 2, or ``tile - 1`` for tiles
    of 1 or 2 latent pixels (any tile >= 1 decodes, as ``check_spec`` accepts).

    Each chunk after the first is decoded with ``context_frames`` preceding latent frames, whose
    pixels are dropped, so a causal decoder sees the frames it depends on. A tokenizer with its own
    ``tile``/``chunk`` settings (causal3d) decodes with its own, exact, scheme instead.
    """
    if hasattr(tokenizer, "tile") and hasattr(tokenizer, "chunk"):
        # The tokenizer tiles and chunks itself (causal3d: exact chunks, halo'd tiles): use its scheme.
        saved = tokenizer.tile, tokenizer.chunk
        tokenizer.tile = tile if tile is not None else saved[0]
        tokenizer.chunk = chunk_frames if chunk_frames is not None else saved[1]
        try:
            return _decoded(tokenizer, latent).float()
        finally:
            tokenizer.tile, tokenizer.chunk = saved
    if overlap is None:
        overlap = 2 if tile is None else min(2, tile - 1)
    t = latent.shape[2]
    if chunk_frames is None or chunk_frames >= t:
        return decode_tiled(tokenizer, latent, tile, overlap).float()
    if chunk_frames < 1 or context_frames < 0:
        raise ValueError(f"need chunk_frames >= 1 and context_frames >= 0; got {chunk_frames} and {context_frames}")
    r = tokenizer.temporal_compression
    parts = []
    for start in range(0, t, chunk_frames):
        stop = min(start + chunk_frames, t)
        begin = max(0, start - context_frames)
        pixels = decode_tiled(tokenizer, latent[:, :, begin:stop], tile, overlap).float()
        parts.append(pixels if start == 0 else pixels[:, :, -(stop - start) * r :])
    return torch.cat(parts, dim=2)
