"""Encode or decode large videos piece by piece: spatial tiles with a halo, temporal chunks streamed.

Temporal chunks are exact: the causal layers keep the frames the next chunk needs (streaming).
Spatial tiles are computed with ``halo`` extra latents around them and cropped; when the halo covers
the receptive field (the default) a tile equals the same region of the whole frame.
"""

from __future__ import annotations

import torch
from torch import nn

from vfm_models.tokenizers.causal3d.layers import set_streaming


def _ranges(n: int, tile: int | None) -> list[tuple[int, int]]:
    if tile is None or tile >= n:
        return [(0, n)]
    return [(a, min(a + tile, n)) for a in range(0, n, tile)]


def stream_frames(net: nn.Module, x: torch.Tensor, first: int | None, rest: int) -> torch.Tensor:
    """``net(x)`` computed on frames [0, first), then ``rest`` frames at a time, concatenated in time."""
    if first is None or x.shape[2] <= first:
        return net(x)
    set_streaming(net, True)
    try:
        outs = [net(x[:, :, :first])]
        outs += [net(x[:, :, i : i + rest]) for i in range(first, x.shape[2], rest)]
    finally:
        set_streaming(net, False)
    return torch.cat(outs, 2)


def tiled(
    net: nn.Module,
    x: torch.Tensor,
    *,
    in_per_latent: int,
    out_per_latent: int,
    tile: int | None,
    halo: int,
    first: int | None,
    rest: int,
) -> torch.Tensor:
    """Apply ``net`` to (B, C, T, H, W) tile by tile over a latent grid of H/in_per_latent x W/in_per_latent.

    Each tile of ``tile`` x ``tile`` latents is computed from its input region grown by ``halo``
    latents (clipped at the frame border), streamed over time, and cropped back to the tile.
    """
    gh, gw = x.shape[3] // in_per_latent, x.shape[4] // in_per_latent
    out: torch.Tensor | None = None
    i, o = in_per_latent, out_per_latent
    for a0, a1 in _ranges(gh, tile):
        for b0, b1 in _ranges(gw, tile):
            h0, h1 = max(0, a0 - halo), min(gh, a1 + halo)
            w0, w1 = max(0, b0 - halo), min(gw, b1 + halo)
            y = stream_frames(net, x[:, :, :, h0 * i : h1 * i, w0 * i : w1 * i], first, rest)
            y = y[:, :, :, (a0 - h0) * o : (a1 - h0) * o, (b0 - w0) * o : (b1 - w0) * o]
            if out is None:
                out = y.new_empty(*y.shape[:3], gh * o, gw * o)
            out[:, :, :, a0 * o : a1 * o, b0 * o : b1 * o] = y
    assert out is not None
    return out
