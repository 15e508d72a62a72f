"""``sd-vae``: the Stable Diffusion image VAE through diffusers' ``AutoencoderKL``, from a local folder.

DiT (facebookresearch/DiT, diffusers ``DiTPipeline``) works in this VAE's latent space: 4 channels,
8x smaller in space, scaled by 0.18215 (``stabilityai/sd-vae-ft-ema`` / ``-ft-mse``). Video frames
are encoded one by one (no temporal compression), so an image is T = 1.

An optional dependency: it needs ``diffusers`` (``pip install diffusers``) and says so when it is
missing. The folder is a diffusers model folder (``config.json`` + safetensors) or a pipeline folder
with one in ``vae/``; weights load from safetensors only, and nothing is downloaded.

Latents are scaled as diffusers' pipelines scale them, (z - shift_factor) * scaling_factor with both
from the VAE's config (no shift_factor: 0), so a converted DiT sees the latents it was trained on.
Encoding returns the posterior mode (its mean).
"""

from __future__ import annotations

from os import PathLike

import torch

from vfm_models.tokenizers._diffusers_vae import load_autoencoder
from vfm_models.tokenizers._shapes import check_latent, check_pixels, video_latent_shape
from vfm_models.options import named_options


@named_options("tokenizer")
class SDVAETokenizer:
    """An ``AutoencoderKL`` from ``path``: pixels (B, 3, T, H, W) in [-1, 1] <-> latents (B, 4, T, H/8, W/8).

    The unbatched (C, T, H, W) <-> (C', T, H', W') works too. Channels and the spatial compression
    come from the VAE's config (SD: 3 -> 4 channels, 2 ** (len(block_out_channels) - 1) = 8);
    ``scaling_factor`` overrides the config's. ``frames`` frames go through the VAE at once
    (default: all of them). ``dtype`` is the dtype the VAE runs in (default float32); results are float32.
    """

    temporal_compression = 1

    def __init__(self, path: str | PathLike, device: str = "cpu", dtype: torch.dtype | str | None = None,
                 scaling_factor: float | None = None, frames: int | None = None) -> None:
        self.vae, folder, self.dtype = load_autoencoder(
            "sd-vae", "AutoencoderKL", path,
            "a local copy of an AutoencoderKL (e.g. stabilityai/sd-vae-ft-ema) or a pipeline folder with one in vae/",
            device, dtype)
        config = self.vae.config
        self.device = device
        self.channels = int(config.in_channels)
        self.latent_channels = int(config.latent_channels)
        self.spatial_compression = 2 ** (len(config.block_out_channels) - 1)
        scale = scaling_factor if scaling_factor is not None else config.get("scaling_factor")
        if scale is None or not float(scale) > 0:
            raise ValueError(f"sd-vae tokenizer: {folder} gives scaling_factor {scale!r}; it must be a positive "
                             "number (0.18215 for Stable Diffusion 1.x / sd-vae-ft-*): set the scaling_factor option")
        self.scaling_factor = float(scale)
        self.shift_factor = float(config.get("shift_factor") or 0.0)
        if frames is not None and int(frames) < 1:
            raise ValueError(f"sd-vae tokenizer: frames must be a positive number of frames per VAE call; got {frames}")
        self.frames = int(frames) if frames is not None else None

    @staticmethod
    def declared_latent_channels(options) -> int | None:
        """``latent_channels`` of the VAE folder's config.json (the folder, else its ``vae/``), unbuilt: an
        export is checked when written, without loading the VAE."""
        from vfm_models.declared_sizes import folder_config_int

        return folder_config_int(options.get("path"), ("latent_channels",), ("vae",))

    def latent_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Latent (C', T, H/8, W/8) for pixels (C, T, H, W); a leading batch dim is kept."""
        return video_latent_shape("sd-vae", shape, self.channels, 1, self.spatial_compression, self.latent_channels)

    def _per_frame(self, x: torch.Tensor, fn) -> torch.Tensor:
        """Apply ``fn`` (B*T, C, H, W) -> (B*T, C2, H2, W2) to each frame of (B, C, T, H, W)."""
        b, c, t, h, w = x.shape
        frames = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
        step = self.frames or b * t
        out = torch.cat([fn(frames[i:i + step]) for i in range(0, b * t, step)])
        return out.reshape(b, t, *out.shape[1:]).permute(0, 2, 1, 3, 4)

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        """(B, 3, T, H, W) in [-1, 1] -> scaled latents (B, 4, T, H/8, W/8) float32 (unbatched too)."""
        self.latent_shape(video.shape)
        check_pixels("sd-vae", video)
        batched = video.dim() == 5
        x = (video if batched else video.unsqueeze(0)).to(self.device, self.dtype)
        with torch.no_grad():
            z = self._per_frame(x, lambda f: self.vae.encode(f).latent_dist.mode()).float()
        z = (z - self.shift_factor) * self.scaling_factor
        return z if batched else z[0]

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        """Scaled latents (B, 4, T, H', W') -> pixels (B, 3, T, H'*8, W'*8) in [-1, 1], float32 (unbatched too)."""
        batched = latent.dim() == 5
        z = latent if batched else latent.unsqueeze(0)
        check_latent("sd-vae", z.shape, self.latent_channels)
        z = z.float() / self.scaling_factor + self.shift_factor
        with torch.no_grad():
            x = self._per_frame(z.to(self.device, self.dtype), lambda f: self.vae.decode(f).sample).float()
        return x if batched else x[0]
