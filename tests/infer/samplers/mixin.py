"""The shared test every sampler runs (diffusers-style): subclass it and set ``sampler_name``."""

from __future__ import annotations

import math

import pytest
import torch

import vfm_infer
from vfm_infer.samplers.base import FORMULATIONS, Sampler
from tests.infer.analytic import GaussianMixture, ode_endpoint

ORDER_STEPS = (8, 16, 32, 64)


def fitted_order(steps: tuple[int, ...], errors: list[float]) -> float:
    """Minus the least-squares slope of log(error) against log(N)."""
    x = torch.tensor(steps, dtype=torch.float64).log()
    y = torch.tensor(errors, dtype=torch.float64).log()
    return -float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())


def mixture() -> GaussianMixture:
    return GaussianMixture(
        torch.tensor([[-2.0, 0.0], [1.5, 1.0], [0.5, -2.0]], dtype=torch.float64),
        torch.tensor([0.3, 0.5, 0.4], dtype=torch.float64),
        torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64),
    )


class SamplerTestMixin:
    sampler_name: str
    options: dict = {}
    #: Enough steps that the discretisation error is below the sampling error of 10k samples.
    mixture_steps: int = 32

    def make(self, steps: int, **extra) -> Sampler:
        return vfm_infer.host.get("samplers", self.sampler_name)(steps, **{**self.options, **extra})

    def test_is_registered_and_declares_a_known_formulation(self):
        cls = vfm_infer.host.get("samplers", self.sampler_name)
        assert issubclass(cls, Sampler)
        assert cls.formulation in FORMULATIONS

    def test_levels_decrease_from_the_noise_level_to_zero(self):
        levels = self.make(10).levels()
        assert levels.shape == (11,)
        assert levels[-1] == 0 and bool((levels[1:] < levels[:-1]).all())

    def test_calls_the_denoiser_as_often_as_it_declares(self):
        sampler = self.make(6)
        calls = []
        gm = GaussianMixture.single(torch.zeros(3, dtype=torch.float64), 0.5)
        oracle = gm.denoiser(sampler.formulation)

        def counting(x, level):
            assert level.shape == (x.shape[0],) and level.dtype == x.dtype
            calls.append(float(level[0]))
            return oracle(x, level)

        steps = []
        sampler.sample(counting, torch.randn(2, 3, dtype=torch.float64), callback=lambda i, n: steps.append((i, n)))
        assert len(calls) == sampler.num_evaluations()
        assert steps == [(i, 6) for i in range(1, 7)]

    @pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
    def test_half_precision_latents_meet_the_exact_levels_and_keep_their_dtype(self, dtype):
        # bf16 holds 8 significant bits: a level in the latents' dtype was rounded (DDIM's timestep 751
        # reached the model as 752, EDM's sigma 34.99 as 35.0) while the solver stepped with the exact one
        # The levels float32 latents meet are the reference: a sampler may also visit levels between the
        # scheduled ones (a midpoint rule, churn), and those must not be rounded either.
        sampler = self.make(7)

        def run(latent_dtype):
            seen = []

            def denoiser(x, level):
                seen.append(level)
                return torch.zeros_like(x, dtype=torch.float32)  # a model that answers in float32

            out = sampler.sample(denoiser, torch.randn(2, 3).to(latent_dtype), generator=torch.Generator().manual_seed(0))
            return out, seen

        _, reference = run(torch.float32)
        out, seen = run(dtype)
        assert all(level.dtype == torch.float32 for level in seen)
        assert [float(level[0]) for level in seen] == [float(level[0]) for level in reference]
        assert out.dtype == dtype

    def test_same_noise_gives_the_same_sample(self):
        sampler = self.make(5)
        gm = mixture()
        noise = torch.randn(16, 2, dtype=torch.float64)
        a = sampler.sample(gm.denoiser(sampler.formulation), noise, generator=torch.Generator().manual_seed(1))
        b = sampler.sample(gm.denoiser(sampler.formulation), noise, generator=torch.Generator().manual_seed(1))
        assert torch.equal(a, b)

    def test_rejects_a_non_positive_step_count(self):
        with pytest.raises(ValueError, match="steps must be an integer >= 1"):
            self.make(0)

    def test_mixture_samples_have_the_data_mean_and_covariance(self):
        sampler = self.make(self.mixture_steps)
        gm = mixture()
        g = torch.Generator().manual_seed(0)
        noise = torch.randn(10_000, 2, generator=g, dtype=torch.float64)
        out = sampler.sample(gm.denoiser(sampler.formulation), noise, generator=g)
        # Standard errors at 10k samples: ~0.017 for the mean, ~0.04 for the (co)variances (~2-3).
        assert (out.mean(0) - gm.mean()).abs().max() < 0.06
        assert (out.T.cov() - gm.covariance()).abs().max() < 0.12
        # A multi-modal check: the share of samples nearest each component matches its weight.
        nearest = torch.cdist(out, gm.means).argmin(1)
        shares = torch.bincount(nearest, minlength=3).double() / len(out)
        assert (shares - gm.weights).abs().max() < 0.03


class ODESamplerTestMixin(SamplerTestMixin):
    """For deterministic samplers: the endpoint error against the closed form falls at ``order``."""

    #: the step counts whose errors the order is fitted to (in the solver's asymptotic range)
    order_steps: tuple[int, ...] = ORDER_STEPS
    # how far above its declared order a sampler may converge on the single Gaussian (pre-asymptotic
    # convergence can look faster than the order, never slower)
    order_slack_above: float = 0.6

    def ode_reference(self, sampler: Sampler, mean: torch.Tensor, std: float, noise: torch.Tensor) -> torch.Tensor:
        """What an exact solver would return: the closed-form ODE endpoint from the first level."""
        return ode_endpoint(sampler.formulation, mean, std, noise, float(sampler.levels()[0]))

    def test_ode_endpoint_error_falls_at_the_declared_order(self):
        mean = torch.tensor([0.3, -0.5, 1.0, 0.0], dtype=torch.float64)
        std = 0.5
        gm = GaussianMixture.single(mean, std)
        noise = torch.randn(64, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        errors = []
        for n in self.order_steps:
            sampler = self.make(n)
            out = sampler.sample(gm.denoiser(sampler.formulation), noise)
            errors.append(float((out - self.ode_reference(sampler, mean, std, noise)).abs().max()))
        assert all(math.isfinite(e) and e > 0 for e in errors)
        assert errors == sorted(errors, reverse=True), errors
        order = fitted_order(self.order_steps, errors)
        # Pre-asymptotic convergence can look faster than the order (shifted schedules), never slower.
        assert sampler.order - 0.4 < order < sampler.order + self.order_slack_above, \
            f"fitted order {order:.2f}, declared {sampler.order}; errors {errors}"
