"""Rectified flow (Liu et al. 2022; Esser et al. 2024, "Scaling Rectified Flow Transformers", SD3).

x_s = (1 - s) x0 + s eps, s in [0, 1] (s = 1 is pure noise); the network predicts the velocity
v = dx_s/ds = eps - x0. Training s is logit-normal, optionally shifted towards noise (SD3 eq. 23),
and optionally mixed with a fraction of uniform draws: a large shift leaves the low-noise levels,
where the last steps of sampling remove the fine grain, almost untrained (0.6% of draws below
s = 0.2 at shift 3), and a few uniform draws train them without moving the bulk of the draws.
"""

from __future__ import annotations

import torch

from vfm_models.formulations._reduce import per_sample
from vfm_models.formulations.base import Formulation, prediction
from vfm_models.options import named_options


@named_options("formulation")
class RectifiedFlow(Formulation):
    """Velocity prediction on the straight path between data and noise.

    The network ``model(x, t, cond)`` receives ``t = s`` itself.
    """

    name = "rectified-flow"
    option_names = ("logit_mean", "logit_std", "shift", "uniform_fraction")
    default_guidance = 2.0  # the export's guidance when training dropped conditions (vfm_infer.guidance)

    def __init__(self, logit_mean: float = 0.0, logit_std: float = 1.0, shift: float = 1.0,
                 uniform_fraction: float = 0.0) -> None:
        if logit_std <= 0 or shift <= 0:
            raise ValueError(f"rectified flow needs logit_std > 0 and shift > 0; got {logit_std} and {shift}")
        if not 0.0 <= uniform_fraction <= 1.0:
            raise ValueError(f"rectified flow's uniform_fraction is a share of the training draws, in [0, 1]; got {uniform_fraction}")
        self.logit_mean = logit_mean
        self.logit_std = logit_std
        self.shift = shift
        self.uniform_fraction = uniform_fraction

    def options(self) -> dict:
        """The constructor arguments for an export; ``uniform_fraction`` only when set, so an export of
        a run without it reads as before (a subclass whose ``__init__`` does not take it never records it:
        :meth:`Formulation.options`)."""
        options = super().options()
        if not self.uniform_fraction:
            options.pop("uniform_fraction", None)
        return options

    # --- the path -------------------------------------------------------------------------------

    @staticmethod
    def interpolate(x0: torch.Tensor, eps: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """x_s = (1 - s) x0 + s eps; ``s`` broadcasts to x0."""
        return (1 - s) * x0 + s * eps

    @staticmethod
    def velocity_target(x0: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
        """v = eps - x0."""
        return eps - x0

    @staticmethod
    def x0_from_velocity(x: torch.Tensor, s, v: torch.Tensor) -> torch.Tensor:
        """x0 = x_s - s v (exact on the straight path)."""
        return x - per_sample(s, x) * v

    @staticmethod
    def eps_from_velocity(x: torch.Tensor, s, v: torch.Tensor) -> torch.Tensor:
        """eps = x_s + (1 - s) v."""
        return x + (1 - per_sample(s, x)) * v

    def shift_time(self, s: torch.Tensor) -> torch.Tensor:
        """SD3 time shift: s' = shift s / (1 + (shift - 1) s); shift > 1 moves s towards noise."""
        return self.shift * s / (1 + (self.shift - 1) * s)

    def network_time(self, s: torch.Tensor) -> torch.Tensor:
        """The ``t`` the network sees for path position ``s``: s itself."""
        return torch.as_tensor(s, dtype=torch.float32)

    def denoise(self, model, x: torch.Tensor, s, cond: dict) -> torch.Tensor:
        """The predicted velocity v(x_s, s) (B, C, T, H, W); s: scalar or (B,)."""
        s = per_sample(s, x)
        return prediction(model(x, s.flatten(), cond), x.shape[1]).to(torch.float32)

    # --- training -------------------------------------------------------------------------------

    def sample_s(self, batch: int, generator: torch.Generator | None, device=None) -> torch.Tensor:
        """s = shift_time(sigmoid(u)), u ~ N(logit_mean, logit_std^2) -> (B,) float32; with
        ``uniform_fraction`` f > 0, each draw is instead s ~ U(0, 1) with probability f (no extra
        random numbers are drawn when f = 0: runs without it draw what they always drew)."""
        u = torch.randn(batch, generator=generator, device=device) * self.logit_std + self.logit_mean
        s = self.shift_time(torch.sigmoid(u))
        if self.uniform_fraction > 0:
            pick = torch.rand(batch, generator=generator, device=device) < self.uniform_fraction
            s = torch.where(pick, torch.rand(batch, generator=generator, device=device), s)
        return s

    sample_level = sample_s

    def network_inputs(self, x0, s, eps):
        """x_s = (1 - s) x0 + s eps; the network sees x_s and s."""
        x_s = self.interpolate(x0, eps, per_sample(s, x0))
        return x_s, x_s, s

    def error(self, v_hat, x_s, x0, s, eps):
        """(v_theta(x_s, s) - (eps - x0))^2."""
        return (v_hat - self.velocity_target(x0, eps)) ** 2

    def regression(self, x_s, x0, s, eps):
        """Target v = eps - x0, weight 1."""
        return self.velocity_target(x0, eps), torch.ones_like(per_sample(s, x0))

    # --- sampling helpers -----------------------------------------------------------------------

    def times(self, num_steps: int, device=None) -> torch.Tensor:
        """(N + 1,) float64 path positions from 1 (noise) to 0 (data): uniform, then shifted."""
        if num_steps < 1:
            raise ValueError(f"num_steps must be >= 1, got {num_steps}")
        return self.shift_time(torch.linspace(1.0, 0.0, num_steps + 1, dtype=torch.float64, device=device))
