"""What every formulation shares: the training-loss recipe and the options record."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from vfm_models.formulations._reduce import masked_sample_mean, reduce


class Formulation:
    """Subclasses define ``sample_level`` (the training noise level per sample), ``network_inputs``
    (what the network sees for given levels and noise) and ``error`` (the weighted squared error of
    its output), so that dense and packed losses share one recipe."""

    name = ""
    #: constructor arguments, stored as ``formulation_options`` in an inference export
    option_names: tuple[str, ...] = ()

    def options(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.option_names}

    def sample_level(self, batch: int, generator: torch.Generator | None, device=None) -> torch.Tensor:
        raise NotImplementedError

    def network_inputs(self, y: torch.Tensor, level: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(noisy x, the network's input, the network's t (B,)) for clean y, levels (B,) and noise (float32)."""
        raise NotImplementedError

    def error(self, out: torch.Tensor, x: torch.Tensor, y: torch.Tensor, level: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """The weighted squared error per element of the network output ``out`` (float32)."""
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
        The network input keeps the dtype of x0; the formulas run in float32.
        """
        noise_generator = generator if noise_generator is None else noise_generator
        level = self.sample_level(x0.shape[0], generator, x0.device)
        noise = torch.randn(x0.shape, generator=noise_generator, device=x0.device, dtype=torch.float32)
        y = x0.to(torch.float32)
        x, net_x, t = self.network_inputs(y, level, noise)
        out = model(net_x.to(x0.dtype), t, cond).to(torch.float32)
        return reduce(masked_sample_mean(self.error(out, x, y, level, noise), mask), reduction)

    def loss_packed(
        self,
        model,
        x0s: Sequence[torch.Tensor],
        cond: dict,
        generator: torch.Generator | None = None,
        noise_generator: torch.Generator | None = None,
        *,
        reduction: str = "mean",
    ) -> torch.Tensor:
        """The loss of N samples of different shapes (C, T_i, H_i, W_i) in one packed model call.

        Calls ``model.forward_packed(list, t (N,), cond)`` (docs/contracts.md section 1). Each sample
        gets its own level and noise (levels first, then the noise of each sample in order) and
        counts once in the mean, whatever its size.
        """
        noise_generator = generator if noise_generator is None else noise_generator
        device = x0s[0].device
        level = self.sample_level(len(x0s), generator, device)
        prepared = []
        for i, x0 in enumerate(x0s):
            noise = torch.randn((1, *x0.shape), generator=noise_generator, device=device, dtype=torch.float32)
            y = x0[None].to(torch.float32)
            prepared.append((y, noise, *self.network_inputs(y, level[i : i + 1], noise)))
        outs = model.forward_packed(
            [net_x[0].to(x0.dtype) for x0, (_, _, _, net_x, _) in zip(x0s, prepared)], torch.cat([p[4] for p in prepared]), cond
        )
        per_sample = torch.stack(
            [
                self.error(out[None].to(torch.float32), x, y, level[i : i + 1], noise).mean()
                for i, (out, (y, noise, x, _, _)) in enumerate(zip(outs, prepared))
            ]
        )
        return reduce(per_sample, reduction)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v}' for k, v in self.options().items())})"
