"""What every formulation shares: the training-loss recipe and the options record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from vfm_models.formulations._reduce import masked_sample_mean, reduce


@dataclass
class TrainingPieces:
    """One training loss cut where the network sits, for callers that run the network themselves
    (a pipeline schedule): ``loss == weighted_mse(model(net_x, t, cond), target, weight)``."""

    net_x: torch.Tensor  # (B, C, T, H, W) the network input, in the dtype of x0
    t: torch.Tensor  # (B,) float32 the network's time input
    target: torch.Tensor  # (B, C, T, H, W) float32 what the network output regresses to
    weight: torch.Tensor  # (B, 1, 1, 1, 1) float32 the per-sample weight of the squared error


def prediction(out: torch.Tensor, channels: int) -> torch.Tensor:
    """The prediction channels of a network output (B, C_out, ...): all of them when C_out equals the
    data's ``channels``, the first half when C_out = 2 x channels (DiT's learned sigma: the prediction,
    then the variance, which the formulations do not use)."""
    if out.shape[1] == channels:
        return out
    if out.shape[1] == 2 * channels:
        return out[:, :channels]
    raise ValueError(f"the network output has {out.shape[1]} channels for data of {channels}; "
                     f"accepted: {channels}, or {2 * channels} (a learned-sigma output, prediction first)")


def weighted_mse(out: torch.Tensor, target: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """mean(weight * (out - target)^2) over every element, in float32: the dense loss (equal-size samples).
    A learned-sigma ``out`` (twice the target's channels) counts with its prediction half."""
    return (weight * (prediction(out, target.shape[1]).to(torch.float32) - target) ** 2).mean()


def _check_noise(noise: torch.Tensor, shape: Sequence[int], generator_given: bool) -> torch.Tensor:
    """An explicit noise tensor, float32; it must have the data's shape and excludes a noise generator."""
    if generator_given:
        raise ValueError("pass either noise_generator or an explicit noise tensor, not both")
    if tuple(noise.shape) != tuple(shape):
        raise ValueError(f"noise of shape {tuple(noise.shape)} does not match the data shape {tuple(shape)}; it must be equal")
    return noise.to(torch.float32)


class Formulation:
    """Subclasses define ``sample_level`` (the training noise level per sample), ``network_inputs``
    (what the network sees for given levels and noise) and ``error`` (the weighted squared error of
    its output), so that dense and packed losses share one recipe."""

    name = ""
    #: constructor arguments, stored as ``formulation_options`` in an inference export
    option_names: tuple[str, ...] = ()
    #: the classifier-free guidance scale an export of this formulation defaults to when training
    #: dropped conditions (``guidance`` in the export; 1 = no guidance)
    default_guidance: float = 1.0

    def options(self) -> dict[str, Any]:
        """The constructor arguments an export records and ``vfm generate`` rebuilds this formulation with:
        the :attr:`option_names` that this class's constructor takes. A subclass whose ``__init__`` fixes
        some of its parent's (a plugin's ``RectifiedFlow`` with its own draws) inherits option names it
        does not take; recording them made the export unloadable (``__init__() got an unexpected keyword
        argument``) after the whole training run."""
        from vfm_plugins import unknown_options

        # none is unknown to a constructor taking **kwargs (or whose signature cannot be read)
        not_taken, _ = unknown_options(type(self), self.option_names)
        return {k: getattr(self, k) for k in self.option_names if k not in not_taken}

    def sample_level(self, batch: int, generator: torch.Generator | None, device=None) -> torch.Tensor:
        raise NotImplementedError

    def network_inputs(self, y: torch.Tensor, level: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(noisy x, the network's input, the network's t (B,)) for clean y, levels (B,) and noise (float32)."""
        raise NotImplementedError

    def error(self, out: torch.Tensor, x: torch.Tensor, y: torch.Tensor, level: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """The weighted squared error per element of the network output ``out`` (float32)."""
        raise NotImplementedError

    def regression(self, x: torch.Tensor, y: torch.Tensor, level: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(target, weight (B, 1, 1, 1, 1)) with ``error(out, ...) == weight * (out - target)^2`` (float32)."""
        raise NotImplementedError

    def _draw(self, x0: torch.Tensor, generator, noise_generator, noise) -> tuple[torch.Tensor, torch.Tensor]:
        """(levels (B,), Gaussian noise like x0, float32): the level first, then the noise."""
        level = self.sample_level(x0.shape[0], generator, x0.device)
        if noise is not None:
            return level, _check_noise(noise, x0.shape, noise_generator is not None)
        noise_generator = generator if noise_generator is None else noise_generator
        return level, torch.randn(x0.shape, generator=noise_generator, device=x0.device, dtype=torch.float32)

    def training_pieces(
        self,
        x0: torch.Tensor,
        generator: torch.Generator | None = None,
        noise_generator: torch.Generator | None = None,
        *,
        noise: torch.Tensor | None = None,
    ) -> TrainingPieces:
        """The draws and formulas of :meth:`loss` without the network call: with the same generators
        (or noise), ``loss(model, x0, cond, ...) == weighted_mse(model(p.net_x, p.t, cond), p.target, p.weight)``."""
        level, noise = self._draw(x0, generator, noise_generator, noise)
        y = x0.to(torch.float32)
        x, net_x, t = self.network_inputs(y, level, noise)
        target, weight = self.regression(x, y, level, noise)
        return TrainingPieces(net_x.to(x0.dtype), t, target, weight)

    def loss(
        self,
        model,
        x0: torch.Tensor,
        cond: dict,
        generator: torch.Generator | None = None,
        noise_generator: torch.Generator | None = None,
        *,
        noise: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        reduction: str = "mean",
    ) -> torch.Tensor:
        """The training loss of ``model(x, t, cond)`` on clean latents x0 (B, C, T, H, W).

        ``generator`` draws the noise level, ``noise_generator`` (default: ``generator``) the
        Gaussian noise, unless ``noise`` (x0's shape) gives it explicitly (a context-parallel
        trainer assembles it from one stream per sequence shard). The error is averaged over
        elements (only where ``mask``, broadcastable to x0, is true), then over the batch
        (``reduction="mean"``) or not (``"none"``: (B,)).
        The network input keeps the dtype of x0; the formulas run in float32. A learned-sigma
        output (2 x the data's channels) counts with its prediction half (:func:`prediction`).
        """
        level, noise = self._draw(x0, generator, noise_generator, noise)
        y = x0.to(torch.float32)
        x, net_x, t = self.network_inputs(y, level, noise)
        out = prediction(model(net_x.to(x0.dtype), t, cond), x0.shape[1]).to(torch.float32)
        return reduce(masked_sample_mean(self.error(out, x, y, level, noise), mask), reduction)

    def loss_packed(
        self,
        model,
        x0s: Sequence[torch.Tensor],
        cond: dict,
        generator: torch.Generator | None = None,
        noise_generator: torch.Generator | None = None,
        *,
        noise: Sequence[torch.Tensor] | None = None,
        reduction: str = "mean",
    ) -> torch.Tensor:
        """The loss of N samples of different shapes (C, T_i, H_i, W_i) in one packed model call.

        Calls ``model.forward_packed(list, t (N,), cond)`` (docs/contracts.md section 1). Each sample
        gets its own level and noise (levels first, then the noise of each sample in order, or
        ``noise[i]`` of sample i's shape when given) and counts once in the mean, whatever its size.
        """
        if noise is not None and len(noise) != len(x0s):
            raise ValueError(f"{len(noise)} noise tensors for {len(x0s)} samples; give one per sample")
        device = x0s[0].device
        level = self.sample_level(len(x0s), generator, device)
        prepared = []
        for i, x0 in enumerate(x0s):
            if noise is not None:
                sample_noise = _check_noise(noise[i], x0.shape, noise_generator is not None)[None]
            else:
                gen = generator if noise_generator is None else noise_generator
                sample_noise = torch.randn((1, *x0.shape), generator=gen, device=device, dtype=torch.float32)
            y = x0[None].to(torch.float32)
            prepared.append((y, sample_noise, *self.network_inputs(y, level[i : i + 1], sample_noise)))
        outs = model.forward_packed(
            [net_x[0].to(x0.dtype) for x0, (_, _, _, net_x, _) in zip(x0s, prepared)], torch.cat([p[4] for p in prepared]), cond
        )
        per_sample = torch.stack(
            [
                self.error(prediction(out[None], x.shape[1]).to(torch.float32), x, y, level[i : i + 1], noise).mean()
                for i, (out, (y, noise, x, _, _)) in enumerate(zip(outs, prepared))
            ]
        )
        return reduce(per_sample, reduction)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v}' for k, v in self.options().items())})"
