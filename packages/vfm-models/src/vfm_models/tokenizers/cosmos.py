"""``cosmos``: NVIDIA Cosmos tokenizer checkpoints (TorchScript ``encoder.jit`` / ``decoder.jit``).

Loads from a local folder (e.g. a downloaded ``Cosmos-Tokenizer-CV4x8x8``) with ``torch.jit.load``,
which reads TorchScript code and tensors, never pickled Python objects. TorchScript is code all the
same (it runs when the tokenizer encodes and decodes, and a crafted archive can do anything
TorchScript can), so it loads only when the caller says so: ``allow_torchscript=True``
(``vfm generate --trust-torchscript``; docs/security.md).
"""

from __future__ import annotations

import re
import warnings
from os import PathLike
from pathlib import Path

import torch

from vfm_models.dtypes import float_dtype
from vfm_models.tokenizers._shapes import check_latent, check_pixels, check_video, video_latent_shape
from vfm_models.options import named_options

#: Cosmos folder names carry the compression: CV4x8x8 (video: time x height x width), CI8x8 (image).
_VIDEO_NAME = re.compile(r"[CD]V(\d+)x(\d+)x(\d+)")
_IMAGE_NAME = re.compile(r"[CD]I(\d+)x(\d+)")


class TorchScriptNotAllowedError(ValueError):
    """A TorchScript checkpoint that the user did not opt in to loading."""


def _jit_load(path: Path, device: str) -> torch.jit.ScriptModule:
    if not path.is_file():
        raise FileNotFoundError(f"cosmos tokenizer: no {path.name} in {path.parent} (expected encoder.jit and decoder.jit)")
    with warnings.catch_warnings():  # torch >= 2.10 flags TorchScript as deprecated; Cosmos ships it
        warnings.simplefilter("ignore", DeprecationWarning)
        module = torch.jit.load(str(path), map_location=device)
    return module.eval()


def _compression_from_name(name: str) -> tuple[int, int] | None:
    if m := _VIDEO_NAME.search(name):
        return int(m.group(1)), int(m.group(2))
    if m := _IMAGE_NAME.search(name):
        return 1, int(m.group(1))
    return None


@named_options("tokenizer")
class CosmosTokenizer:
    """A continuous Cosmos tokenizer from ``path`` (a folder with ``encoder.jit`` and ``decoder.jit``).

    The compression factors come from the folder name (``CV4x8x8`` -> time 4, space 8) unless given;
    ``latent_channels`` is found by encoding a tiny input unless given. Inputs are (B, 3, T, H, W)
    in [-1, 1], run in the checkpoint's dtype (``dtype`` overrides) and returned as float32.
    ``allow_torchscript`` must be True: the checkpoint is TorchScript, code that vfm cannot check.
    """

    def __init__(
        self,
        path: str | PathLike,
        temporal_compression: int | None = None,
        spatial_compression: int | None = None,
        latent_channels: int | None = None,
        channels: int = 3,
        device: str = "cpu",
        dtype: torch.dtype | str | None = None,
        allow_torchscript: bool = False,
    ) -> None:
        folder = Path(path)
        if not folder.is_dir():
            raise FileNotFoundError(f"cosmos tokenizer: {folder} is not a folder (expected encoder.jit and decoder.jit in it)")
        if not allow_torchscript:
            raise TorchScriptNotAllowedError(
                f"cosmos tokenizer: {folder} holds TorchScript (encoder.jit, decoder.jit), code that runs when "
                "loaded and called; refused unless you trust it: vfm generate --trust-torchscript, "
                "or tokenizer option allow_torchscript = true in your own vfm shard config / CosmosTokenizer(..., allow_torchscript=True)"
            )
        self.encoder = _jit_load(folder / "encoder.jit", device)
        self.decoder = _jit_load(folder / "decoder.jit", device)
        named = _compression_from_name(folder.name)
        tc = temporal_compression or (named[0] if named else None)
        sc = spatial_compression or (named[1] if named else None)
        if tc is None or sc is None:
            raise ValueError(
                f"cosmos tokenizer: cannot tell the compression of {folder.name!r}; pass temporal_compression "
                "and spatial_compression, or keep the Cosmos folder name (e.g. Cosmos-Tokenizer-CV4x8x8)"
            )
        self.temporal_compression, self.spatial_compression = tc, sc
        self.channels, self.device = channels, device
        params = list(self.encoder.parameters())
        dtype = float_dtype(dtype, "cosmos tokenizer")
        self.dtype = dtype or (params[0].dtype if params else torch.float32)
        self.latent_channels = latent_channels or self._probe_latent_channels()

    @staticmethod
    def declared_latent_channels(options) -> int | None:
        """The latent channels given in the options, or None (found by running the checkpoint): an export is
        checked when written, without loading its TorchScript."""
        return options.get("latent_channels")

    def _probe_latent_channels(self) -> int:
        sc = self.spatial_compression
        probe = torch.zeros(1, self.channels, 1, sc, sc)
        return int(self._encode(probe).shape[1])

    def _encode(self, video: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            out = self.encoder(video.to(self.device, self.dtype))
        # continuous Cosmos encoders return the latent, or a tuple whose first item is the latent
        latent = out if isinstance(out, torch.Tensor) else out[0]
        return latent.float()

    def latent_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Latent (C', 1 + (T-1)/tc, H/sc, W/sc) for pixels (C, T, H, W); a leading batch dim is kept."""
        return video_latent_shape(
            "cosmos", shape, self.channels, self.temporal_compression, self.spatial_compression, self.latent_channels
        )

    def encode(self, video: torch.Tensor) -> torch.Tensor:
        """(B, 3, 1 + k*tc, H, W) in [-1, 1] -> (B, C', 1 + k, H/sc, W/sc) float32."""
        check_video("cosmos", video.shape, self.channels, self.temporal_compression, self.spatial_compression,
                    self.latent_channels)
        check_pixels("cosmos", video)
        return self._encode(video)

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        """(B, C', 1 + k, H', W') -> (B, 3, 1 + k*tc, H'*sc, W'*sc) float32."""
        check_latent("cosmos", latent.shape, self.latent_channels)
        with torch.no_grad():
            out = self.decoder(latent.to(self.device, self.dtype))
        return (out if isinstance(out, torch.Tensor) else out[0]).float()
