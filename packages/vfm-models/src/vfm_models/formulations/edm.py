"""EDM (Karras et al. 2022, "Elucidating the Design Space of Diffusion-Based Generative Models").

Written as the paper (Table 1) and NVlabs/edm write it: x = y + n with n ~ N(0, sigma^2 I), and the
denoiser D(x; sigma) = c_skip(sigma) x + c_out(sigma) F(c_in(sigma) x; c_noise(sigma)).
"""

from __future__ import annotations

import torch

from vfm_models.formulations._reduce import per_sample
from vfm_models.formulations.base import Formulation, prediction
from vfm_models.options import named_options


@named_options("formulation")
class EDM(Formulation):
    """EDM preconditioning, log-normal training noise levels and the loss weight lambda(sigma).

    The network ``model(x, t, cond)`` receives ``t = c_noise(sigma) = ln(sigma) / 4``.
    """

    name = "edm"
    option_names = ("sigma_data", "P_mean", "P_std", "sigma_min", "sigma_max", "rho")
    default_guidance = 2.0  # the export's guidance when training dropped conditions (vfm_infer.guidance)

    def __init__(
        self,
        sigma_data: float = 0.5,
        P_mean: float = -1.2,
        P_std: float = 1.2,
        sigma_min: float = 0.002,
        sigma_max: float = 80.0,
        rho: float = 7.0,
    ) -> None:
        if sigma_data <= 0 or P_std <= 0 or not 0 < sigma_min < sigma_max or rho <= 0:
            raise ValueError(
                "EDM needs sigma_data > 0, P_std > 0, 0 < sigma_min < sigma_max and rho > 0; got "
                f"sigma_data={sigma_data}, P_std={P_std}, sigma_min={sigma_min}, sigma_max={sigma_max}, rho={rho}"
            )
        self.sigma_data = sigma_data
        self.P_mean = P_mean
        self.P_std = P_std
        self.sigma_min = sigma_min
        self.sigma_max = sigma_max
        self.rho = rho

    # --- preconditioning (Table 1, "Ours") ------------------------------------------------------

    def c_skip(self, sigma: torch.Tensor) -> torch.Tensor:
        return self.sigma_data**2 / (sigma**2 + self.sigma_data**2)

    def c_out(self, sigma: torch.Tensor) -> torch.Tensor:
        return sigma * self.sigma_data / (sigma**2 + self.sigma_data**2).sqrt()

    def c_in(self, sigma: torch.Tensor) -> torch.Tensor:
        return 1 / (self.sigma_data**2 + sigma**2).sqrt()

    def c_noise(self, sigma: torch.Tensor) -> torch.Tensor:
        return sigma.log() / 4

    def network_time(self, sigma: torch.Tensor) -> torch.Tensor:
        """The ``t`` the network sees for noise level ``sigma``: c_noise(sigma)."""
        return self.c_noise(torch.as_tensor(sigma, dtype=torch.float32))

    def loss_weight(self, sigma: torch.Tensor) -> torch.Tensor:
        """lambda(sigma) = (sigma^2 + sigma_data^2) / (sigma * sigma_data)^2."""
        return (sigma**2 + self.sigma_data**2) / (sigma * self.sigma_data) ** 2

    def denoise(self, model, x: torch.Tensor, sigma, cond: dict) -> torch.Tensor:
        """D(x; sigma) = c_skip x + c_out F(c_in x; c_noise): the denoised estimate of x0.

        x: (B, C, T, H, W); sigma: scalar or (B,). Preconditioning is computed in float32.
        """
        sigma = per_sample(sigma, x)  # (B, 1, 1, 1, 1)
        x32 = x.to(torch.float32)
        F_x = model((self.c_in(sigma) * x32).to(x.dtype), self.c_noise(sigma).flatten(), cond)
        return self._D(x32, sigma, prediction(F_x, x.shape[1]).to(torch.float32))

    def _D(self, x: torch.Tensor, sigma: torch.Tensor, F_x: torch.Tensor) -> torch.Tensor:
        return self.c_skip(sigma) * x + self.c_out(sigma) * F_x

    # --- training -------------------------------------------------------------------------------

    def sample_sigma(self, batch: int, generator: torch.Generator | None, device=None) -> torch.Tensor:
        """ln(sigma) ~ N(P_mean, P_std^2) -> (B,) float32."""
        rnd_normal = torch.randn(batch, generator=generator, device=device)
        return (rnd_normal * self.P_std + self.P_mean).exp()

    sample_level = sample_sigma

    def network_inputs(self, y, sigma, n):
        """x = y + sigma n; the network sees c_in(sigma) x and c_noise(sigma)."""
        s = per_sample(sigma, y)
        x = y + s * n
        return x, self.c_in(s) * x, self.c_noise(sigma)

    def error(self, F_x, x, y, sigma, n):
        """lambda(sigma) (D(x; sigma) - y)^2 with D = c_skip x + c_out F_x."""
        s = per_sample(sigma, y)
        return self.loss_weight(s) * (self._D(x, s, F_x) - y) ** 2

    def regression(self, x, y, sigma, n):
        """lambda (c_skip x + c_out F - y)^2 = lambda c_out^2 (F - (y - c_skip x) / c_out)^2:
        target (y - c_skip x) / c_out, weight lambda c_out^2 (= 1 for EDM's lambda)."""
        s = per_sample(sigma, y)
        c_out = self.c_out(s)
        return (y - self.c_skip(s) * x) / c_out, self.loss_weight(s) * c_out**2

    # --- sampling helpers -----------------------------------------------------------------------

    def sigmas(self, num_steps: int, device=None) -> torch.Tensor:
        """Karras et al. eq. 5: sigma_i = (smax^(1/rho) + i/(N-1) (smin^(1/rho) - smax^(1/rho)))^rho, then 0.

        Returns (N + 1,) float64, decreasing from sigma_max to sigma_min, with a trailing 0.
        """
        if num_steps < 1:
            raise ValueError(f"num_steps must be >= 1, got {num_steps}")
        step = torch.arange(num_steps, dtype=torch.float64, device=device)
        denom = max(num_steps - 1, 1)
        smax, smin, rho = self.sigma_max ** (1 / self.rho), self.sigma_min ** (1 / self.rho), self.rho
        t = (smax + step / denom * (smin - smax)) ** rho
        return torch.cat([t, t.new_zeros(1)])
