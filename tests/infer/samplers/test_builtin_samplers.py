"""Every built-in sampler runs the shared sampler tests; sampler-specific properties follow."""

from __future__ import annotations

import pytest
import torch

import vfm_infer
from vfm_infer.samplers.edm import EDMHeun, karras_sigmas
from vfm_infer.samplers.flow import shifted_levels
from tests.infer.analytic import GaussianMixture
from tests.infer.samplers.mixin import ODESamplerTestMixin, SamplerTestMixin


class TestEDMHeun(ODESamplerTestMixin):
    sampler_name = "edm-heun"


class TestEDMEuler(ODESamplerTestMixin):
    sampler_name = "edm-euler"
    mixture_steps = 128


class TestEDMHeunWithChurn(SamplerTestMixin):
    sampler_name = "edm-heun"
    options = {"churn": 10.0}
    mixture_steps = 64


class TestDPMSolverPP2M(ODESamplerTestMixin):
    sampler_name = "dpm-solver++"


class TestFlowEuler(ODESamplerTestMixin):
    sampler_name = "flow-euler"
    mixture_steps = 128


class TestFlowHeunShifted(ODESamplerTestMixin):
    sampler_name = "flow-heun"
    options = {"shift": 3.0}


def test_builtin_samplers_are_registered_with_their_formulations():
    formulations = {n: vfm_infer.host.get("samplers", n).formulation for n in vfm_infer.host.names("samplers")}
    assert {k: formulations[k] for k in ("edm-heun", "edm-euler", "dpm-solver++", "flow-euler", "flow-heun")} == {
        "edm-heun": "edm", "edm-euler": "edm", "dpm-solver++": "edm",
        "flow-euler": "rectified-flow", "flow-heun": "rectified-flow",
    }


def test_karras_sigmas_match_the_edm_formula():
    sigmas = karras_sigmas(4, 0.002, 80.0, 7.0)
    expected = [(80 ** (1 / 7) + i / 3 * (0.002 ** (1 / 7) - 80 ** (1 / 7))) ** 7 for i in range(4)] + [0.0]
    assert torch.allclose(sigmas, torch.tensor(expected, dtype=torch.float64), rtol=1e-12)


def test_heun_corrects_with_the_denoiser_at_the_new_point_and_skips_the_last_step():
    sampler = EDMHeun(4)
    sigmas = sampler.levels().tolist()
    seen = []
    gm = GaussianMixture.single(torch.zeros(2, dtype=torch.float64), 0.5)
    sampler.sample(lambda x, s: seen.append(float(s[0])) or gm.edm_denoiser(x, s), torch.randn(1, 2, dtype=torch.float64))
    # Each step evaluates at t_cur, then at t_next (the new point); the last step has no correction.
    assert seen == [sigmas[0], sigmas[1], sigmas[1], sigmas[2], sigmas[2], sigmas[3], sigmas[3]]


def test_flow_shift_moves_steps_toward_high_noise_and_keeps_the_ends():
    plain, shifted = shifted_levels(8, 1.0), shifted_levels(8, 3.0)
    assert shifted[0] == 1 and shifted[-1] == 0
    assert bool((shifted[1:-1] > plain[1:-1]).all())


def test_unknown_sampler_lists_the_available_ones():
    with pytest.raises(KeyError, match="unknown sampler 'nope'; available: .*edm-heun"):
        vfm_infer.host.get("samplers", "nope")


def test_flow_heun_never_evaluates_the_velocity_at_the_data_level():
    """A trained velocity is never fitted at s = 0 (training draws levels inside (0, 1): logit-normal,
    shifted towards noise), so a Heun correction there adds what the model says off its training
    range. Like EDM's (and diffusers') Heun, the last step, to s = 0, is an Euler step: 2N - 1
    evaluations, none at s = 0, and the sample still meets the closed-form ODE endpoint far more
    closely than Euler's (the declared order is checked by TestFlowHeunShifted)."""
    from tests.infer.analytic import ode_endpoint
    from vfm_infer.samplers.flow import FlowEuler, FlowHeun

    mean, std = torch.tensor([0.3, -0.5, 1.0, 0.0], dtype=torch.float64), 0.5
    gm = GaussianMixture.single(mean, std)
    seen = []

    def trained_inside(x, s):  # the analytic velocity inside (0, 1], nothing learnt at s = 0
        seen.append(float(s[0]))
        return torch.full_like(x, float("nan")) if bool((s == 0).any()) else gm.flow_velocity(x, s)

    noise = torch.randn(64, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    sampler = FlowHeun(32, shift=3.0)
    out = sampler.sample(trained_inside, noise)
    assert len(seen) == sampler.num_evaluations() == 2 * 32 - 1 and min(seen) > 0
    assert bool(torch.isfinite(out).all())
    exact = ode_endpoint("rectified-flow", mean, std, noise)
    euler = FlowEuler(32, shift=3.0).sample(gm.flow_velocity, noise)
    error, euler_error = (float((x - exact).abs().max()) for x in (out, euler))
    assert error < 0.04 and error < euler_error / 4, (error, euler_error)  # measured 0.028 and 0.138


def test_every_sampler_vfm_infer_registers_runs_the_analytic_ode_oracle():
    """A sampler added to vfm-infer without a test class here (or in test_ddim) would ship unchecked
    against the closed-form ODE endpoint and the order it declares."""
    from tests.infer.samplers import test_ddim

    builtin = {e.name for e in vfm_infer.host.entries("samplers").values() if e.provider == "vfm-infer"}
    oracled = {cls.sampler_name for module in (globals(), vars(test_ddim)) for cls in module.values()
               if isinstance(cls, type) and issubclass(cls, ODESamplerTestMixin) and hasattr(cls, "sampler_name")}
    assert builtin and builtin <= oracled, sorted(builtin - oracled)
