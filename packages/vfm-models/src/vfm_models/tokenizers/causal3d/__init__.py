"""``causal3d``: a trainable causal 3D convolutional autoencoder (images and videos share it).

The first frame is encoded alone, then every ``temporal_compression`` frames become one latent
frame: T = 1 + k*tc pixels <-> 1 + k latents; H and W shrink by ``spatial_compression``.
"""

from __future__ import annotations

from os import PathLike

import torch
from torch import nn

from vfm_models.tokenizers._shapes import check_latent, check_pixels, check_video, video_latent_shape
from vfm_models.tokenizers.causal3d.autoencoder import Decoder, Encoder
from vfm_models.tokenizers.causal3d.tiling import tiled
from vfm_models.options import named_options

__all__ = ["Causal3DTokenizer"]


def _log2(name: str, value: int, accepted: tuple[int, ...]) -> int:
    if value not in accepted:
        raise ValueError(f"causal3d {name} must be one of {accepted}, got {value}")
    return value.bit_length() - 1


#: The most values a causal3d tokenizer without weights may hold (random init: 1 GB in float32).
MAX_RANDOM_VALUES = 1 << 28


def _check_size(build, weights) -> None:
    """Refuse options describing a model its ``weights`` do not hold (names, shapes), or, without
    weights, more than :data:`MAX_RANDOM_VALUES` values, before allocating it."""
    from vfm_models.export import build_on_meta, check_build_fits, weight_shapes

    if weights is not None and str(weights).endswith(".safetensors"):
        check_build_fits(build, weight_shapes(weights), f"causal3d options do not fit the weights {weights}")
        return
    skeleton = build_on_meta(build, 4096, f"causal3d options do not fit the weights {weights}")
    if (values := sum(p.numel() for p in skeleton.parameters())) > MAX_RANDOM_VALUES:
        raise ValueError(f"causal3d options describe {values} values without weights; accepted: at most "
                         f"{MAX_RANDOM_VALUES} (or a weights file that holds them)")


@named_options("tokenizer")
class Causal3DTokenizer(nn.Module):
    """Causal 3D autoencoder: ``encode`` (B, C, T, H, W) in [-1, 1] -> latents, ``decode`` back.

    Random-init by default; ``weights`` loads a safetensors file (see :meth:`save`). ``tile``
    (latents per tile side) and ``chunk`` (latent frames per temporal chunk) bound the memory of
    ``encode``/``decode`` on large inputs (under ``torch.no_grad()``: with autograd on, every chunk's
    activations are kept for the backward); None means all at once. Chunks are exact; tiles are exact
    with the default ``halo`` (None: the receptive field, in latents), a smaller halo is cheaper
    and approximate near tile seams. ``forward`` reconstructs, for training.
    """

    def __init__(
        self,
        temporal_compression: int = 4,
        spatial_compression: int = 8,
        latent_channels: int = 16,
        channels: int = 3,
        base_channels: int = 64,
        channel_mult: tuple[int, ...] | None = None,
        num_res_blocks: int = 1,
        weights: str | PathLike | None = None,
        tile: int | None = None,
        chunk: int | None = None,
        halo: int | None = None,
    ) -> None:
        super().__init__()
        n_space = _log2("spatial_compression", spatial_compression, (2, 4, 8, 16))
        n_time = _log2("temporal_compression", temporal_compression, (1, 2, 4, 8))
        if n_time > n_space:
            raise ValueError(
                f"causal3d halves time only together with space: temporal_compression {temporal_compression} "
                f"must be <= spatial_compression {spatial_compression}"
            )
        mult = tuple(channel_mult) if channel_mult is not None else (1, 2, 4, 4, 4)[: n_space + 1]
        if len(mult) != n_space + 1:
            raise ValueError(
                f"channel_mult needs log2(spatial_compression) + 1 = {n_space + 1} entries, got {len(mult)}: {mult}"
            )
        for name, value, low in (("tile", tile, 1), ("chunk", chunk, 1), ("halo", halo, 0)):
            if value is not None and value < low:
                raise ValueError(f"causal3d {name} must be None or >= {low}, got {value}")
        self.temporal_compression = temporal_compression
        self.spatial_compression = spatial_compression
        self.latent_channels = latent_channels
        self.channels = channels
        self.tile, self.chunk, self.halo = tile, chunk, halo
        # an export names these options: sized against the weights (or a cap) on the meta device first
        sizes = (channels, latent_channels, base_channels, mult, num_res_blocks, n_time)
        _check_size(lambda: nn.ModuleDict({"encoder": Encoder(*sizes), "decoder": Decoder(*sizes)}), weights)
        self.encoder, self.decoder = Encoder(*sizes), Decoder(*sizes)
        if weights is not None:
            from vfm_models.checkpoint import load_into

            load_into(self, weights)

    @staticmethod
    def declared_latent_channels(options) -> int:
        """The latent channels of these options (defaults filled in), unbuilt: an export is checked when written."""
        return int(options["latent_channels"])

    def latent_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Latent (C', 1 + (T-1)/tc, H/sc, W/sc) for pixels (C, T, H, W); a leading batch dim is kept."""
        return video_latent_shape(
            "causal3d", shape, self.channels, self.temporal_compression, self.spatial_compression, self.latent_channels
        )

    def _check_video(self, video: torch.Tensor) -> None:
        check_video("causal3d", video.shape, self.channels, self.temporal_compression, self.spatial_compression,
                    self.latent_channels)
        check_pixels("causal3d", video)

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        """(B, C, 1 + k*tc, H, W) -> (B, latent_channels, 1 + k, H/sc, W/sc), in the weights' dtype (a video
        of another float dtype is cast, as the other tokenizers cast it)."""
        self._check_video(video)
        video = video.to(self.encoder.conv_in.conv.weight.dtype)
        tc, sc = self.temporal_compression, self.spatial_compression
        first = None if self.chunk is None else 1 + (self.chunk - 1) * tc
        halo = -(-self.encoder.radius // sc) if self.halo is None else self.halo  # in latents
        return tiled(
            self.encoder, video, in_per_latent=sc, out_per_latent=1, tile=self.tile, halo=halo, first=first, rest=(self.chunk or 1) * tc
        )

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        """(B, latent_channels, 1 + k, H', W') -> (B, C, 1 + k*tc, H'*sc, W'*sc), in the weights' dtype
        (a bfloat16 sampler's latent is cast)."""
        check_latent("causal3d", latent.shape, self.latent_channels)
        latent = latent.to(self.decoder.conv_in.conv.weight.dtype)
        sc = self.spatial_compression
        return tiled(
            self.decoder, latent, in_per_latent=1, out_per_latent=sc, tile=self.tile, halo=self.decoder.radius if self.halo is None else self.halo, first=self.chunk, rest=self.chunk or 1
        )

    def forward(self, video: torch.Tensor) -> torch.Tensor:
        """Reconstruction decode(encode(video)), whole (untiled), for training."""
        self._check_video(video)
        return self.decoder(self.encoder(video))

    def save(self, path: str | PathLike) -> None:
        """Write the weights to a safetensors file that ``weights=`` loads."""
        from vfm_models.checkpoint import save_state_dict

        save_state_dict(path, self.state_dict(), {"format": "vfm-causal3d"})
