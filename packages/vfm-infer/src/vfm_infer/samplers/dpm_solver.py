"""DPM-Solver++(2M) (Lu et al. 2022), the multistep second-order solver in data prediction.

On the EDM schedule with lambda = -ln(sigma) (the VE form, alpha = 1): one evaluation per step; the
first step (no history yet) and the last step (to sigma = 0) are first-order updates.
"""

from __future__ import annotations

import math

from vfm_infer.samplers.edm import check_karras_schedule, karras_sigmas
from vfm_infer.samplers.base import Sampler


class DPMSolverPP2M(Sampler):
    formulation = "edm"
    order = 2

    def __init__(self, steps: int = 32, *, sigma_min: float = 0.002, sigma_max: float = 80.0, rho: float = 7.0) -> None:
        super().__init__(steps)
        check_karras_schedule(sigma_min, sigma_max, rho)
        self.sigma_min, self.sigma_max, self.rho = sigma_min, sigma_max, rho

    def levels(self):
        return karras_sigmas(self.steps, self.sigma_min, self.sigma_max, self.rho)

    def num_evaluations(self) -> int:
        return self.steps

    def _run(self, evaluate, x, levels, generator, callback):
        old_denoised = None
        h_last = None
        for i, (sigma, sigma_next) in enumerate(zip(levels[:-1], levels[1:])):
            denoised = evaluate(x, sigma)
            if sigma_next == 0:
                # lambda_next = +inf: the update x_next = (sigma_next / sigma) x + (1 - e^-h) D reduces to D.
                x = denoised
            else:
                h = math.log(sigma) - math.log(sigma_next)  # lambda_next - lambda
                if old_denoised is None:
                    d = denoised
                else:
                    r = h_last / h
                    d = (1 + 1 / (2 * r)) * denoised - (1 / (2 * r)) * old_denoised
                x = (sigma_next / sigma) * x - math.expm1(-h) * d
                h_last = h
            old_denoised = denoised
            callback(i + 1, self.steps)
        return x
