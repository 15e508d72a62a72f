"""Analytic denoisers for Gaussian (mixture) data: the oracles the samplers are tested against.

Data x0 ~ sum_k pi_k N(mu_k, s_k^2 I). Under EDM, x = x0 + sigma n, so given component k,
x ~ N(mu_k, (s_k^2 + sigma^2) I) and E[x0 | x, k] = mu_k + s_k^2 / (s_k^2 + sigma^2) (x - mu_k).
Under rectified flow, x_s = (1 - s) x0 + s eps, so x_s | k ~ N((1 - s) mu_k, V_k I) with
V_k = (1 - s)^2 s_k^2 + s^2, and E[eps - x0 | x_s, k] = (s - (1 - s) s_k^2) / V_k (x_s - (1 - s) mu_k) - mu_k.
The posterior weights of the components are pi_k N(x; mean_k, var_k I) normalised.
Under DDPM, x_tau = sqrt(abar) x0 + sqrt(1 - abar) eps (vfm-models' default schedule), so
y = x_tau / sqrt(abar) = x0 + sigma eps with sigma = sqrt((1 - abar) / abar): the EDM case, and
E[eps | x_tau] = (y - D(y; sigma)) / sigma.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch


@dataclass
class GaussianMixture:
    means: torch.Tensor  # (K, D)
    stds: torch.Tensor  # (K,)
    weights: torch.Tensor  # (K,)

    @classmethod
    def single(cls, mean: torch.Tensor, std: float) -> "GaussianMixture":
        return cls(mean[None].double(), torch.tensor([std], dtype=torch.float64), torch.ones(1, dtype=torch.float64))

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    def mean(self) -> torch.Tensor:
        return self.weights @ self.means

    def covariance(self) -> torch.Tensor:
        m = self.mean()
        cov = torch.zeros(self.dim, self.dim, dtype=torch.float64)
        for w, mu, s in zip(self.weights, self.means, self.stds):
            d = (mu - m)[:, None]
            cov += w * (s**2 * torch.eye(self.dim, dtype=torch.float64) + d @ d.T)
        return cov

    def _posterior(self, x: torch.Tensor, centers: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
        # x (B, D), centers (B or 1, K, D), var (B, K) -> responsibilities (B, K)
        sq = ((x[:, None, :] - centers) ** 2).sum(-1)
        logp = self.weights.log()[None] - 0.5 * sq / var - 0.5 * self.dim * var.log()
        return torch.softmax(logp, dim=1)

    def edm_denoiser(self, x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        """D(x; sigma) = E[x0 | x]; x (B, D), sigma (B,)."""
        var = self.stds[None] ** 2 + sigma[:, None] ** 2  # (B, K)
        r = self._posterior(x, self.means[None], var)
        per = self.means[None] + (self.stds[None] ** 2 / var)[..., None] * (x[:, None] - self.means[None])
        return (r[..., None] * per).sum(1)

    def flow_velocity(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """v(x, s) = E[eps - x0 | x_s]; x (B, D), s (B,)."""
        s = s[:, None]  # (B, 1)
        var = (1 - s) ** 2 * self.stds[None] ** 2 + s**2  # (B, K)
        centers = (1 - s)[..., None] * self.means[None]  # (B, K, D)
        r = self._posterior(x, centers, var)
        slope = (s - (1 - s) * self.stds[None] ** 2) / var  # (B, K)
        per = slope[..., None] * (x[:, None] - centers) - self.means[None]
        return (r[..., None] * per).sum(1)

    def ddpm_eps(self, x: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        """eps(x, tau) = E[eps | x_tau]; x (B, D), tau (B,) step counts of the default DDPM schedule."""
        a = _ddpm().alpha_bar(tau).to(x.dtype)[:, None]  # (B, 1)
        sigma = ((1 - a) / a).sqrt()
        y = x / a.sqrt()
        return (y - self.edm_denoiser(y, sigma[:, 0])) / sigma

    def denoiser(self, formulation: str):
        return {"edm": self.edm_denoiser, "rectified-flow": self.flow_velocity, "ddpm": self.ddpm_eps}[formulation]


@functools.lru_cache(maxsize=1)
def _ddpm():
    from vfm_models.formulations.ddpm import DDPM

    return DDPM()


def ode_endpoint(formulation: str, mean: torch.Tensor, std: float, noise: torch.Tensor, start: float = 80.0):
    """Closed-form probability-flow ODE endpoint for N(mean, std^2 I) data from standard ``noise``,
    ``start`` being the sampler's first noise level (EDM: sigma_max; DDPM: the step count tau).

    EDM: x_T = sigma_max * noise and x0 = mu + s (x_T - mu) / sqrt(s^2 + sigma_max^2).
    DDPM: x_tau = noise, in EDM's variables y = noise / sqrt(abar) at sigma = sqrt((1 - abar) / abar).
    Rectified flow: x_s = (1 - s) mu + sqrt(V(s)) z along the ODE; at s = 1, z = x_1 = noise, so
    x0 = mu + s * noise.
    """
    if formulation == "edm":
        x_t = start * noise
        return mean + std * (x_t - mean) / math.sqrt(std**2 + start**2)
    if formulation == "ddpm":
        a = float(_ddpm().alpha_bar(start))
        sigma = math.sqrt((1 - a) / a)
        return mean + std * (noise / math.sqrt(a) - mean) / math.sqrt(std**2 + sigma**2)
    return mean + std * noise
