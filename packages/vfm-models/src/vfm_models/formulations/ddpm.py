"""DDPM (Ho et al. 2020, "Denoising Diffusion Probabilistic Models"): the discrete VP chain with
noise (epsilon) prediction, as DiT (facebookresearch/DiT) and diffusers' DDPM/DDIM schedulers run it.

Betas beta_1..beta_T (linear from 1e-4 to 0.02 over T = 1000 steps by default), alpha_t = 1 - beta_t,
abar_tau = prod_{s <= tau} alpha_s (abar_0 = 1) and, the paper's eq. 4,

    x_tau = sqrt(abar_tau) x0 + sqrt(1 - abar_tau) eps,   eps ~ N(0, I).

vfm's noise level is the step count ``tau`` in [0, T] (tau = 0: clean data); the network sees the
0-based index that DiT, guided-diffusion and diffusers feed it, ``t = tau - 1`` in 0..T-1. Training
draws tau uniformly from {1..T} and regresses the output on eps (the paper's "simple" loss, eq. 14).
"""

from __future__ import annotations

import math

import torch

from vfm_models.formulations._reduce import per_sample
from vfm_models.formulations.base import Formulation, prediction
from vfm_models.options import named_options

BETA_SCHEDULES = ("linear", "scaled_linear", "squaredcos_cap_v2")
#: how inference steps are spread over the training steps (diffusers' names and definitions)
SPACINGS = ("leading", "trailing", "linspace")
#: The most training timesteps DDPM accepts (its tables are 8 bytes a step; diffusers' DDPM uses 1000).
MAX_TRAIN_TIMESTEPS = 1_000_000


def make_betas(schedule: str, num_train_timesteps: int, beta_start: float, beta_end: float) -> torch.Tensor:
    """beta_1..beta_T (T,) float64 as diffusers names the schedules: ``linear`` (Ho et al.),
    ``scaled_linear`` (linear in sqrt(beta), Stable Diffusion), ``squaredcos_cap_v2`` (Nichol &
    Dhariwal 2021 eq. 17, betas capped at 0.999; ignores beta_start/beta_end)."""
    T = num_train_timesteps
    if schedule == "linear":
        return torch.linspace(beta_start, beta_end, T, dtype=torch.float64)
    if schedule == "scaled_linear":
        return torch.linspace(beta_start**0.5, beta_end**0.5, T, dtype=torch.float64) ** 2

    def f(t: float) -> float:
        return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2

    return torch.tensor([min(1 - f((i + 1) / T) / f(i / T), 0.999) for i in range(T)], dtype=torch.float64)


@named_options("formulation")
class DDPM(Formulation):
    """Epsilon prediction on the discrete DDPM chain; the network gets t = tau - 1 (integer scale).

    **Learned sigma.** A model whose output has 2 x in_channels channels (DiT's ``learn_sigma``:
    the prediction, then the variance interpolation v of Nichol & Dhariwal) is trained and sampled
    on its first half only; the variance half is ignored (no gradient reaches it: DiT's hybrid
    VLB term is not implemented), and the samplers (DDIM, the probability-flow ODE) need no variance.
    """

    name = "ddpm"
    option_names = ("num_train_timesteps", "beta_start", "beta_end", "beta_schedule")
    #: DiT's sample.py and diffusers' DiTPipeline default (used when training dropped conditions)
    default_guidance = 4.0

    def __init__(
        self,
        num_train_timesteps: int = 1000,
        beta_start: float = 1e-4,
        beta_end: float = 0.02,
        beta_schedule: str = "linear",
    ) -> None:
        if (isinstance(num_train_timesteps, bool) or not isinstance(num_train_timesteps, int)
                or not 1 <= num_train_timesteps <= MAX_TRAIN_TIMESTEPS):  # an export names it: 10**10 was 80 GB of tables
            raise ValueError(f"num_train_timesteps must be an integer in [1, {MAX_TRAIN_TIMESTEPS}], got {num_train_timesteps!r}")
        if beta_schedule not in BETA_SCHEDULES:
            raise ValueError(f"beta_schedule must be one of {', '.join(BETA_SCHEDULES)}; got {beta_schedule!r}")
        if not 0 < beta_start <= beta_end < 1:
            raise ValueError(f"DDPM needs 0 < beta_start <= beta_end < 1; got beta_start={beta_start}, beta_end={beta_end}")
        self.num_train_timesteps = num_train_timesteps
        self.beta_start = beta_start
        self.beta_end = beta_end
        self.beta_schedule = beta_schedule
        betas = make_betas(beta_schedule, num_train_timesteps, beta_start, beta_end)
        #: abar_tau for tau = 0..T, (T + 1,) float64, abar_0 = 1 (clean data)
        self.alphas_cumprod = torch.cat([torch.ones(1, dtype=torch.float64), torch.cumprod(1 - betas, 0)])
        self._tables: dict[torch.device, torch.Tensor] = {}  # alphas_cumprod per device, copied once

    # --- the chain ------------------------------------------------------------------------------

    def alpha_bar(self, tau) -> torch.Tensor:
        """abar at step count ``tau`` (any shape, in [0, T]), float64: the table at integers,
        log-linear between them (so the continuous level of an ODE solver is defined too)."""
        tau = torch.as_tensor(tau, dtype=torch.float64)
        T = self.num_train_timesteps
        if bool(((tau < 0) | (tau > T)).any()):
            raise ValueError(f"DDPM noise level tau must lie in [0, {T}] (the step count, 0 = clean); got {tau.tolist()}")
        return self._alpha_bar(tau)

    def _alpha_bar(self, tau: torch.Tensor) -> torch.Tensor:
        """:meth:`alpha_bar` without the range check (a host sync on an accelerator), for levels
        the formulation drew itself."""
        tau = tau.to(torch.float64)
        table = self._tables.get(tau.device)
        if table is None:
            table = self._tables[tau.device] = self.alphas_cumprod.to(tau.device)
        lo = tau.floor().clamp(0, self.num_train_timesteps - 1).long()
        frac = tau - lo
        return table[lo] * (table[lo + 1] / table[lo]) ** frac  # exactly table[lo] when frac == 0

    def sigma_ve(self, tau) -> torch.Tensor:
        """The equivalent variance-exploding noise level sqrt((1 - abar) / abar) (x / sqrt(abar) = x0 + sigma eps)."""
        a = self.alpha_bar(tau)
        return ((1 - a) / a).sqrt()

    def network_time(self, tau) -> torch.Tensor:
        """The ``t`` the network sees at step count tau: tau - 1 (0..T-1, what DiT was trained on)."""
        return torch.as_tensor(tau, dtype=torch.float32) - 1

    def x0_from_eps(self, x: torch.Tensor, tau, eps: torch.Tensor) -> torch.Tensor:
        """x0 = (x - sqrt(1 - abar) eps) / sqrt(abar) (eq. 4 solved for x0); float32."""
        a = per_sample(self.alpha_bar(per_sample(tau, x).flatten()), x)
        return (x.to(torch.float32) - (1 - a).sqrt() * eps) / a.sqrt()

    def eps_from_x0(self, x: torch.Tensor, tau, x0: torch.Tensor) -> torch.Tensor:
        """eps = (x - sqrt(abar) x0) / sqrt(1 - abar); float32 (undefined at tau = 0)."""
        a = per_sample(self.alpha_bar(per_sample(tau, x).flatten()), x)
        return (x.to(torch.float32) - a.sqrt() * x0) / (1 - a).sqrt()

    def denoise(self, model, x: torch.Tensor, tau, cond: dict) -> torch.Tensor:
        """The predicted noise eps(x_tau, tau) (B, C, T, H, W) float32; tau: scalar or (B,).
        A learned-sigma output's variance half is dropped."""
        tau = per_sample(tau, x)
        out = model(x, self.network_time(tau.flatten()), cond)
        return prediction(out, x.shape[1]).to(torch.float32)

    # --- training -------------------------------------------------------------------------------

    def sample_tau(self, batch: int, generator: torch.Generator | None, device=None) -> torch.Tensor:
        """tau uniform on {1..T} -> (B,) float32 (the network gets tau - 1, uniform on {0..T-1})."""
        t = torch.randint(0, self.num_train_timesteps, (batch,), generator=generator, device=device)
        return (t + 1).to(torch.float32)

    sample_level = sample_tau

    def network_inputs(self, x0, tau, eps):
        """x_tau = sqrt(abar) x0 + sqrt(1 - abar) eps; the network sees x_tau and tau - 1."""
        a = per_sample(self._alpha_bar(tau), x0)
        x = a.sqrt() * x0 + (1 - a).sqrt() * eps
        return x, x, self.network_time(tau)

    def error(self, out, x, x0, tau, eps):
        """(eps_theta(x_tau, tau - 1) - eps)^2 (Ho et al. eq. 14); ``out`` is the prediction half."""
        return (out - eps) ** 2

    def regression(self, x, x0, tau, eps):
        """Target eps, weight 1."""
        return eps, torch.ones_like(per_sample(tau, x0))

    # --- sampling helpers -----------------------------------------------------------------------

    def timesteps(self, num_steps: int, spacing: str = "leading", steps_offset: int = 0) -> torch.Tensor:
        """The step counts an N-step sampler visits, (N + 1,) float64, decreasing, ending at 0 (clean).

        They are the 0-based training timesteps of diffusers' schedulers plus one, with clean data
        after the last (diffusers' ``set_alpha_to_one=True`` / ``final_sigmas_type="zero"``):
        ``leading`` (DDIMScheduler's default): t_i = i * (T // N) + steps_offset;
        ``trailing``: t_i = round(T - i * T / N) - 1;
        ``linspace`` (DPMSolverMultistepScheduler's default): round(linspace(0, T - 1, N + 1)) without its 0.
        """
        T = self.num_train_timesteps
        if isinstance(num_steps, bool) or not isinstance(num_steps, int) or not 1 <= num_steps <= T:
            raise ValueError(f"the number of sampling steps must be an integer in [1, {T}] (the training steps); got {num_steps!r}")
        if spacing not in SPACINGS:
            raise ValueError(f"timestep spacing must be one of {', '.join(SPACINGS)}; got {spacing!r}")
        if isinstance(steps_offset, bool) or not isinstance(steps_offset, int) or steps_offset < 0:
            raise ValueError(f"steps_offset must be an integer >= 0, got {steps_offset!r}")
        if steps_offset and spacing != "leading":
            raise ValueError(f"steps_offset applies to the 'leading' spacing only (as in diffusers); got spacing {spacing!r}")
        i = torch.arange(num_steps, dtype=torch.float64)
        if spacing == "leading":
            t = (i * (T // num_steps) + steps_offset).flip(0)
        elif spacing == "trailing":
            t = torch.round(T - i * (T / num_steps)) - 1
        else:
            t = torch.linspace(0, T - 1, num_steps + 1, dtype=torch.float64).round().flip(0)[:-1]
        levels = torch.cat([t + 1, t.new_zeros(1)])
        if levels[0] > T or not bool((levels[1:] < levels[:-1]).all()):
            raise ValueError(f"{num_steps} steps with {spacing!r} spacing and steps_offset {steps_offset} do not give "
                             f"distinct timesteps within 0..{T - 1}; use fewer steps or a smaller offset")
        return levels
