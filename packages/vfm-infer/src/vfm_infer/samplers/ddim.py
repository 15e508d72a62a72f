"""Samplers for the DDPM formulation (noise prediction on the discrete VP chain): DDIM and the
probability-flow ODE.

The denoiser callable returns eps(x_tau, tau); x_tau = alpha x0 + sigma eps with alpha = sqrt(abar),
sigma = sqrt(1 - abar) from vfm-models' DDPM schedule, and the levels are step counts tau (the network
sees tau - 1), at the training timesteps chosen by the spacing, then 0 (clean data). Both start from
x = noise (diffusers' ``init_noise_sigma = 1``) and are evaluated only at integer training timesteps.

- ``ddim`` (Song et al. 2021, eq. 12): x0_hat = (x - sigma eps) / alpha, then
  x' = alpha' x0_hat + sqrt(1 - abar' - s^2) eps + s z with s = eta sqrt((1 - abar') / (1 - abar)
  (1 - abar / abar')); eta = 0 is deterministic (a first-order solver of the probability-flow ODE),
  eta = 1 the DDPM ancestral sampler. Step for step what diffusers' ``DDIMScheduler`` computes
  (``clip_sample=False``, ``set_alpha_to_one=True``, spacing ``leading`` with ``steps_offset`` by
  default, as DiT's scheduler config has), with the noise of eta > 0 drawn from ``generator`` like it.
- ``vp-ode``: DPM-Solver++(2M) (Lu et al. 2022) on the probability-flow ODE of the VP SDE, in
  log-SNR lambda = ln(alpha / sigma): data prediction D = x0_hat, x' = (sigma'/sigma) x - alpha'
  (e^-h - 1) d with h = lambda' - lambda and d = D, or (1 + 1/(2r)) D - D_prev / (2r) (r = h_prev / h)
  after the first step; the first and the last step (to tau = 0, lambda = +inf, where x' = D) are
  first order. One evaluation per step; second order. It is diffusers' ``DPMSolverMultistepScheduler``
  with its defaults (dpmsolver++, order 2, midpoint, ``final_sigmas_type="zero"``, ``linspace`` spacing).
"""

from __future__ import annotations

import math

import torch

from vfm_infer.samplers.base import Sampler
from vfm_infer.samplers.edm import churn_noise


class _DDPMSampler(Sampler):
    formulation = "ddpm"
    spacing_default = "leading"

    def __init__(
        self,
        steps: int = 32,
        *,
        num_train_timesteps: int = 1000,
        beta_start: float = 1e-4,
        beta_end: float = 0.02,
        beta_schedule: str = "linear",
        timestep_spacing: str | None = None,
        steps_offset: int = 0,
    ) -> None:
        super().__init__(steps)
        from vfm_models.formulations.ddpm import DDPM

        self.schedule = DDPM(num_train_timesteps, beta_start, beta_end, beta_schedule)
        self.timestep_spacing = timestep_spacing or self.spacing_default
        self.steps_offset = steps_offset
        self.levels()  # checks steps, spacing and offset now, before any denoising

    def levels(self) -> torch.Tensor:
        return self.schedule.timesteps(self.steps, self.timestep_spacing, self.steps_offset)

    def num_evaluations(self) -> int:
        return self.steps

    def initial(self, noise: torch.Tensor) -> torch.Tensor:
        """x at the first level is the noise itself (VP: abar_T is close to 0)."""
        return noise

    def _alpha_bars(self, levels: list[float]) -> list[float]:
        return self.schedule.alpha_bar(torch.tensor(levels, dtype=torch.float64)).tolist()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(steps={self.steps}, spacing={self.timestep_spacing!r}, schedule={self.schedule})"


class DDIM(_DDPMSampler):
    """DDIM; ``eta`` 0 (default) is deterministic, > 0 adds fresh noise each step (1: DDPM)."""

    order = 1

    def __init__(
        self,
        steps: int = 32,
        *,
        eta: float = 0.0,
        num_train_timesteps: int = 1000,
        beta_start: float = 1e-4,
        beta_end: float = 0.02,
        beta_schedule: str = "linear",
        timestep_spacing: str | None = None,
        steps_offset: int = 0,
    ) -> None:  # every option named: the pipeline passes the export's schedule by these names
        super().__init__(steps, num_train_timesteps=num_train_timesteps, beta_start=beta_start, beta_end=beta_end,
                         beta_schedule=beta_schedule, timestep_spacing=timestep_spacing, steps_offset=steps_offset)
        if not (isinstance(eta, (int, float)) and math.isfinite(eta) and 0 <= eta <= 1):
            raise ValueError(f"DDIM's eta must be a number in [0, 1] (0: deterministic, 1: DDPM), got {eta!r}")
        self.eta = float(eta)

    def _run(self, evaluate, x, levels, generator, callback):
        abar = self._alpha_bars(levels)
        for i, (tau, a, a_next) in enumerate(zip(levels[:-1], abar[:-1], abar[1:])):
            eps = evaluate(x, tau)
            x0 = (x - (1 - a) ** 0.5 * eps) / a**0.5
            std = self.eta * ((1 - a_next) / (1 - a) * (1 - a / a_next)) ** 0.5
            x = a_next**0.5 * x0 + (1 - a_next - std**2) ** 0.5 * eps
            if self.eta > 0:  # drawn on every step, the last (std = 0) included, as diffusers does
                x = x + std * churn_noise(x, generator)
            callback(i + 1, self.steps)
        return x


class VPODE(_DDPMSampler):
    """DPM-Solver++(2M) on the VP probability-flow ODE (second order, one evaluation per step)."""

    order = 2
    spacing_default = "linspace"

    def _run(self, evaluate, x, levels, generator, callback):
        abar = self._alpha_bars(levels)
        old_denoised = h_last = None
        for i, (tau, a, a_next) in enumerate(zip(levels[:-1], abar[:-1], abar[1:])):
            alpha, sigma = a**0.5, (1 - a) ** 0.5
            denoised = (x - sigma * evaluate(x, tau)) / alpha
            if a_next == 1:  # clean data: lambda' = +inf and the update reduces to D
                x = denoised
            else:
                alpha_next, sigma_next = a_next**0.5, (1 - a_next) ** 0.5
                h = math.log(alpha_next / sigma_next) - math.log(alpha / sigma)
                if old_denoised is None:
                    d = denoised
                else:
                    r = h_last / h
                    d = (1 + 1 / (2 * r)) * denoised - (1 / (2 * r)) * old_denoised
                x = (sigma_next / sigma) * x - alpha_next * math.expm1(-h) * d
                h_last = h
            old_denoised = denoised
            callback(i + 1, self.steps)
        return x
