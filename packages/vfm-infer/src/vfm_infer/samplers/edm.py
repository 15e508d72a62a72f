"""EDM samplers (Karras et al. 2022, NVlabs/edm ``edm_sampler``): Heun (Algorithm 2) and Euler.

Variable names follow the paper: ``t_cur``/``t_next`` are sigmas, ``gamma`` the churn, ``t_hat`` the
raised noise level, ``d_cur``/``d_prime`` the ODE slopes (x - D(x; t)) / t.
"""

from __future__ import annotations

import math
import torch

from vfm_infer.samplers.base import Sampler


def karras_sigmas(steps: int, sigma_min: float, sigma_max: float, rho: float) -> torch.Tensor:
    """The EDM time steps (Karras et al. eq. 5) then 0, (steps + 1,) float64: vfm-models' EDM schedule."""
    from vfm_models.formulations.edm import EDM

    return EDM(sigma_min=sigma_min, sigma_max=sigma_max, rho=rho).sigmas(steps)


def check_karras_schedule(sigma_min: float, sigma_max: float, rho: float) -> None:
    """The options of :func:`karras_sigmas`, refused when the sampler is built: a nan or inf among them
    would run every step into a nan latent (nan compares False, so each test is written to fail on it)."""
    if not 0 < sigma_min < sigma_max < math.inf:
        raise ValueError(f"need 0 < sigma_min < sigma_max, both finite, got sigma_min={sigma_min}, sigma_max={sigma_max}")
    if not 0 < rho < math.inf:
        raise ValueError(f"rho must be a finite number > 0 (the schedule's curvature, EDM's 7), got {rho}")


def churn_noise(like: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Standard Gaussian noise shaped like ``like``, on its device and dtype. Drawn on the
    generator's own device (a CPU generator draws on the host, then the noise moves), so a seeded
    generator gives the same churn on every device; without one, torch's default generator of
    ``like``'s device."""
    if generator is None:
        return torch.randn(like.shape, dtype=like.dtype, device=like.device)
    eps = torch.randn(like.shape, generator=generator, dtype=like.dtype, device=generator.device)
    if eps.device.type == "cpu" and like.device.type == "cuda":  # pinned: the copy does not wait for the GPU
        return eps.pin_memory().to(like.device, non_blocking=True)
    return eps.to(device=like.device, dtype=like.dtype)


class _EDMSampler(Sampler):
    formulation = "edm"

    def __init__(
        self,
        steps: int = 32,
        *,
        sigma_min: float = 0.002,
        sigma_max: float = 80.0,
        rho: float = 7.0,
        churn: float = 0.0,
        churn_min: float = 0.0,
        churn_max: float = float("inf"),
        churn_noise: float = 1.0,
    ) -> None:
        super().__init__(steps)
        check_karras_schedule(sigma_min, sigma_max, rho)
        # nan compares False everywhere: a nan churn or churn range would silently mean no churn
        if not (math.isfinite(churn) and churn >= 0):
            raise ValueError(f"churn must be a finite number >= 0 (0 = deterministic ODE), got {churn}")
        if not (math.isfinite(churn_noise) and churn_noise >= 0):
            raise ValueError(f"churn_noise must be a finite number >= 0 (EDM's S_noise, 1 = unit noise), got {churn_noise}")
        if not 0 <= churn_min <= churn_max:
            raise ValueError(f"need 0 <= churn_min <= churn_max (the sigmas churn applies between; churn_max may be inf), "
                             f"got churn_min={churn_min}, churn_max={churn_max}")
        self.sigma_min, self.sigma_max, self.rho = sigma_min, sigma_max, rho
        self.churn, self.churn_min, self.churn_max, self.churn_noise = churn, churn_min, churn_max, churn_noise

    def levels(self) -> torch.Tensor:
        return karras_sigmas(self.steps, self.sigma_min, self.sigma_max, self.rho)

    def _gamma(self, t_cur: float) -> float:
        if self.churn > 0 and self.churn_min <= t_cur <= self.churn_max:
            return min(self.churn / self.steps, math.sqrt(2) - 1)
        return 0.0

    def _run(self, evaluate, x, levels, generator, callback):
        x_next = x
        for i, (t_cur, t_next) in enumerate(zip(levels[:-1], levels[1:])):
            x_cur = x_next
            # Churn: raise the noise level to t_hat by adding fresh noise (Algorithm 2, lines 4-6).
            gamma = self._gamma(t_cur)
            t_hat = t_cur + gamma * t_cur
            if gamma > 0:
                eps = churn_noise(x_cur, generator)
                x_hat = x_cur + math.sqrt(t_hat**2 - t_cur**2) * self.churn_noise * eps
            else:
                x_hat = x_cur
            d_cur = (x_hat - evaluate(x_hat, t_hat)) / t_hat
            x_next = x_hat + (t_next - t_hat) * d_cur
            x_next = self._correct(evaluate, x_hat, x_next, t_hat, t_next, d_cur, last=i == len(levels) - 2)
            callback(i + 1, self.steps)
        return x_next

    def _correct(self, evaluate, x_hat, x_next, t_hat, t_next, d_cur, *, last: bool) -> torch.Tensor:
        return x_next


class EDMEuler(_EDMSampler):
    """First-order Euler steps on the EDM probability-flow ODE (N evaluations)."""

    order = 1

    def num_evaluations(self) -> int:
        return self.steps


class EDMHeun(_EDMSampler):
    """EDM's second-order Heun sampler (2N - 1 evaluations).

    The correction evaluates the denoiser at the *new* point (x_next, t_next); reusing the first
    evaluation there would silently make the method first order. On the last step t_next = 0, where
    the slope is undefined, so that step stays an Euler step.
    """

    order = 2

    def num_evaluations(self) -> int:
        return 2 * self.steps - 1

    def _correct(self, evaluate, x_hat, x_next, t_hat, t_next, d_cur, *, last: bool) -> torch.Tensor:
        if last:
            return x_next
        d_prime = (x_next - evaluate(x_next, t_next)) / t_next
        return x_hat + (t_next - t_hat) * (0.5 * d_cur + 0.5 * d_prime)
