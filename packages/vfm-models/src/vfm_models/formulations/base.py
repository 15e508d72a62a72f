"""What every formulation shares: the training-loss recipe and the options record."""

from __future__ import annotations

from typing import Any

import torch

from vfm_models.formulations._reduce import masked_sample_mean, reduce


class Formulation:
    """Subclasses define ``sample_level`` (the training noise level per sample) and
    ``elementwise_loss`` (the weighted squared error for given levels and noise)."""

    name = ""
    #: constructor arguments, stored as ``formulation_options`` in an inference export
    option_names: tuple[str, ...] = ()

    def options(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.option_names}

    def sample_level(self, batch: int, generator: torch.Generator | None, device=None) -> torch.Tensor:
        raise NotImplementedError

    def elementwise_loss(
        self, model, y: torch.Tensor, level: torch.Tensor, noise: torch.Tensor, cond: dict, dtype: torch.dtype
    ) -> torch.Tensor:
        """Float32 error per element; the network input is cast to ``dtype`` (that of the data)."""
        raise NotImplementedError

    def loss(
        self,
        model,
        x0: torch.Tensor,
        cond: dict,
        generator: torch.Generator | None = None,
        noise_generator: torch.Generator | None = None,
        *,
        mask: torch.Tensor | None = None,
        reduction: str = "mean",
    ) -> torch.Tensor:
        """The training loss of ``model(x, t, cond)`` on clean latents x0 (B, C, T, H, W).

        ``generator`` draws the noise level, ``noise_generator`` (default: ``generator``) the
        Gaussian noise. The error is averaged over elements (only where ``mask``, broadcastable to
        x0, is true), then over the batch (``reduction="mean"``) or not (``"none"``: (B,)).
        """
        noise_generator = generator if noise_generator is None else noise_generator
        level = self.sample_level(x0.shape[0], generator, x0.device)
        noise = torch.randn(x0.shape, generator=noise_generator, device=x0.device, dtype=torch.float32)
        err = self.elementwise_loss(model, x0.to(torch.float32), level, noise, cond, x0.dtype)
        return reduce(masked_sample_mean(err, mask), reduction)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v}' for k, v in self.options().items())})"
