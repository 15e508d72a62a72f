"""``wan-vae``: Wan 2.1's causal video VAE through diffusers' ``AutoencoderKLWan``, from a local folder.

An optional dependency: it needs ``diffusers`` (``pip install diffusers``) and says so when it is
missing; nothing else in vfm imports diffusers. The folder is a diffusers model folder
(``config.json`` + safetensors) or a pipeline folder with one in ``vae/`` (Wan2.1-T2V-*-Diffusers);
weights load from safetensors only, and nothing is downloaded.

Latents are normalised as Wan's pipelines use them, (z - latents_mean) / latents_std per channel, so
a converted Wan transformer sees the latents it was trained on. Encoding returns the posterior mean.
"""

from __future__ import annotations

from os import PathLike

import torch

from vfm_models.tokenizers._diffusers_vae import load_autoencoder
from vfm_models.tokenizers._shapes import check_latent, check_pixels, check_video, video_latent_shape
from vfm_models.options import named_options


@named_options("tokenizer")
class WanVAETokenizer:
    """Wan's VAE from ``path``: pixels (B, 3, 1 + k*tc, H, W) in [-1, 1] <-> latents (B, z, 1 + k, H/sc, W/sc).

    ``tc`` and ``sc`` come from the VAE's layout (Wan 2.1: 4 and 8, z = 16). ``dtype`` is the
    dtype the VAE runs in (default float32); results are float32.
    """

    def __init__(self, path: str | PathLike, device: str = "cpu", dtype: torch.dtype | str | None = None,
                 normalize: bool = True) -> None:
        self.vae, folder, self.dtype = load_autoencoder(
            "wan-vae", "AutoencoderKLWan", path, "the VAE folder of a local Wan 2.1 diffusers checkpoint",
            device, dtype, requirement="diffusers >= 0.33")
        config = self.vae.config
        if config.get("patch_size") not in (None, 1) or config.get("is_residual"):
            raise ValueError(f"wan-vae tokenizer: {folder} is a Wan 2.2 VAE (patch_size/is_residual); "
                             "vfm reads the Wan 2.1 VAE")
        self.temporal_compression = 2 ** sum(bool(d) for d in config.temperal_downsample)
        if self.temporal_compression != 4:  # diffusers encodes in chunks of 4 frames after the first
            raise ValueError(f"wan-vae tokenizer: {folder} compresses time {self.temporal_compression}x; "
                             "AutoencoderKLWan encodes Wan 2.1's layout, 4x (temperal_downsample with two True)")
        self.device = device
        self.channels = int(config.in_channels)
        self.latent_channels = int(config.z_dim)
        self.spatial_compression = 2 ** (len(config.dim_mult) - 1)
        z = self.latent_channels
        mean, std = (torch.tensor(config.latents_mean, dtype=torch.float32), torch.tensor(config.latents_std, dtype=torch.float32)) \
            if normalize else (torch.zeros(z), torch.ones(z))
        if mean.shape != (z,) or std.shape != (z,):
            raise ValueError(f"wan-vae tokenizer: latents_mean/latents_std of {folder} must have z_dim = {z} "
                             f"entries; got {mean.numel()} and {std.numel()}")
        self.mean, self.std = mean.view(1, z, 1, 1, 1), std.view(1, z, 1, 1, 1)

    @staticmethod
    def declared_latent_channels(options) -> int | None:
        """``z_dim`` of the VAE folder's config.json (the folder, else its ``vae/``), unbuilt: an export is
        checked when written, without loading the VAE."""
        from vfm_models.declared_sizes import folder_config_int

        return folder_config_int(options.get("path"), ("z_dim",), ("vae",))

    def latent_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Latent (z, 1 + (T-1)/tc, H/sc, W/sc) for pixels (C, T, H, W); a leading batch dim is kept."""
        return video_latent_shape("wan-vae", shape, self.channels, self.temporal_compression,
                                  self.spatial_compression, self.latent_channels)

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        """(B, 3, 1 + k*tc, H, W) in [-1, 1] -> normalised latents (B, z, 1 + k, H/sc, W/sc) float32."""
        check_video("wan-vae", video.shape, self.channels, self.temporal_compression, self.spatial_compression,
                    self.latent_channels)
        check_pixels("wan-vae", video)
        with torch.no_grad():
            z = self.vae.encode(video.to(self.device, self.dtype)).latent_dist.mode().float()
        return (z - self.mean.to(z.device)) / self.std.to(z.device)

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        """Normalised latents (B, z, T', H', W') -> pixels (B, 3, 1 + (T'-1)*tc, H'*sc, W'*sc) in [-1, 1], float32."""
        check_latent("wan-vae", latent.shape, self.latent_channels)
        z = latent.float() * self.std.to(latent.device) + self.mean.to(latent.device)
        with torch.no_grad():
            return self.vae.decode(z.to(self.device, self.dtype)).sample.float()
