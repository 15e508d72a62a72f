"""DDPM against the paper's equations and guided-diffusion's (DiT's) code; learned-sigma outputs in
every formulation."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import vfm_models
from vfm_models.formulations import DDPM, weighted_mse
import tests.models.test_formulations as shared


def guided_diffusion_alphas_cumprod(T: int = 1000) -> torch.Tensor:
    """guided-diffusion's get_named_beta_schedule("linear") (scale 1000 / T) and np.cumprod, 0-based."""
    scale = 1000 / T
    betas = torch.linspace(scale * 0.0001, scale * 0.02, T, dtype=torch.float64)
    out, prod = [], 1.0
    for b in betas.tolist():
        prod *= 1 - b
        out.append(prod)
    return torch.tensor(out, dtype=torch.float64)


def ddpm_reference_elementwise(net, x0, t0, noise):
    """Ho et al. Algorithm 1 as DiT's training_losses(..., "simple") writes it: t ~ U{0..T-1} (0-based),
    x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps, loss (eps - eps_theta(x_t, t))^2."""
    abar = guided_diffusion_alphas_cumprod()[t0].to(torch.float32).view(-1, 1, 1, 1, 1)
    x_t = abar.sqrt() * x0 + (1 - abar).sqrt() * noise
    return (net(x_t, t0.to(torch.float32), {}) - noise) ** 2


def test_the_schedule_is_ho_et_al_linear_and_matches_diffusers_for_each_named_schedule():
    torch.testing.assert_close(DDPM().alphas_cumprod[1:], guided_diffusion_alphas_cumprod(), rtol=1e-12, atol=0)
    assert DDPM().alphas_cumprod[0] == 1  # tau = 0 is clean data
    diffusers = pytest.importorskip("diffusers")
    for schedule in ("linear", "scaled_linear", "squaredcos_cap_v2"):
        ours = DDPM(beta_schedule=schedule, beta_start=0.00085, beta_end=0.012).alphas_cumprod[1:]
        theirs = diffusers.DDPMScheduler(beta_schedule=schedule, beta_start=0.00085, beta_end=0.012).alphas_cumprod
        torch.testing.assert_close(ours.to(torch.float32), theirs, rtol=2e-5, atol=1e-7)


def test_loss_equals_the_papers_simple_loss_with_integer_network_time():
    x0 = torch.randn(6, 2, 3, 4, 4)
    net = shared.Recorder()
    loss = DDPM().loss(net, x0, {}, torch.Generator().manual_seed(0), torch.Generator().manual_seed(1), reduction="none")
    t0 = torch.randint(0, 1000, (6,), generator=torch.Generator().manual_seed(0))  # DiT draws t this way
    noise = torch.randn(x0.shape, generator=torch.Generator().manual_seed(1))
    expected = ddpm_reference_elementwise(shared.Recorder(), x0, t0, noise).flatten(1).mean(1)
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-6)
    t_seen = net.calls[0][1]
    assert t_seen.dtype == torch.float32 and torch.equal(t_seen, t0.to(torch.float32))


def test_network_time_covers_the_integers_0_to_999():
    tau = DDPM().sample_level(20_000, torch.Generator().manual_seed(0))
    t = DDPM().network_time(tau)
    assert torch.equal(t, t.round()) and t.min() == 0 and t.max() == 999
    assert len(t.unique()) == 1000
    assert DDPM(num_train_timesteps=10).network_time(DDPM(num_train_timesteps=10).sample_level(500, None)).max() == 9


def test_the_forward_process_and_its_inverses():
    form = DDPM()
    x0, eps = torch.randn(3, 2, 1, 4, 4), torch.randn(3, 2, 1, 4, 4)
    tau = torch.tensor([1.0, 500.0, 1000.0])
    x, net_x, t = form.network_inputs(x0, tau, eps)
    a = guided_diffusion_alphas_cumprod()[tau.long() - 1].to(torch.float32).view(-1, 1, 1, 1, 1)
    torch.testing.assert_close(x, a.sqrt() * x0 + (1 - a).sqrt() * eps)  # eq. 4
    assert net_x is x and torch.equal(t, tau - 1)
    torch.testing.assert_close(form.x0_from_eps(x, tau, eps), x0, rtol=1e-4, atol=2e-4)
    torch.testing.assert_close(form.eps_from_x0(x, tau, x0), eps, rtol=1e-4, atol=1e-4)
    # sigma of the equivalent VE process: x / sqrt(abar) = x0 + sigma eps
    sigma = form.sigma_ve(tau).to(torch.float32).view(-1, 1, 1, 1, 1)
    torch.testing.assert_close(x / a.sqrt(), x0 + sigma * eps, rtol=1e-4, atol=1e-4)
    # between integers abar is log-linear (a continuous level for ODE solvers), exact at the integers
    mid = form.alpha_bar(torch.tensor(500.5))
    assert math.isclose(float(mid), math.sqrt(float(form.alphas_cumprod[500] * form.alphas_cumprod[501])), rel_tol=1e-12)
    assert form.alpha_bar(torch.tensor(500.0)) == form.alphas_cumprod[500]


def test_sampling_timesteps_are_diffusers_plus_one_then_clean():
    diffusers = pytest.importorskip("diffusers")
    form = DDPM()
    for steps in (1, 7, 25, 50, 1000):
        ddim = diffusers.DDIMScheduler()
        for spacing in ("leading", "trailing"):
            ddim.register_to_config(timestep_spacing=spacing)
            ddim.set_timesteps(steps)
            assert form.timesteps(steps, spacing).tolist() == (ddim.timesteps + 1).tolist() + [0], (steps, spacing)
        dpm = diffusers.DPMSolverMultistepScheduler()
        if steps < 1000:  # linspace spacing repeats timesteps at 1000 steps; vfm refuses that
            dpm.set_timesteps(steps)
            assert form.timesteps(steps, "linspace").tolist() == (dpm.timesteps + 1).tolist() + [0], steps
    with pytest.raises(ValueError, match="distinct timesteps"):
        form.timesteps(1000, "linspace")


def test_bad_options_say_what_is_accepted():
    with pytest.raises(ValueError, match="beta_schedule must be one of linear, scaled_linear, squaredcos_cap_v2"):
        DDPM(beta_schedule="cosine")
    with pytest.raises(ValueError, match="0 < beta_start <= beta_end < 1"):
        DDPM(beta_start=0.02, beta_end=0.01)
    with pytest.raises(ValueError, match=r"num_train_timesteps must be an integer in \[1, 1000000\]"):
        DDPM(num_train_timesteps=0)
    with pytest.raises(ValueError, match=r"tau must lie in \[0, 1000\]"):
        DDPM().alpha_bar(torch.tensor(1001.0))
    with pytest.raises(ValueError, match="steps_offset applies to the 'leading' spacing only"):
        DDPM().timesteps(10, "trailing", steps_offset=1)


def test_registered_and_exported_options_round_trip():
    form = vfm_models.get_formulation("ddpm")(beta_schedule="scaled_linear")
    assert isinstance(form, DDPM)
    assert form.options() == {"num_train_timesteps": 1000, "beta_start": 1e-4, "beta_end": 0.02, "beta_schedule": "scaled_linear"}
    assert torch.equal(DDPM(**form.options()).alphas_cumprod, form.alphas_cumprod)


@pytest.mark.parametrize("check", [
    shared.test_noise_level_comes_from_generator_and_noise_from_noise_generator,
    shared.test_training_a_tiny_denoiser_lowers_the_loss,
    shared.test_explicit_noise_gives_the_loss_of_the_generator_that_drew_it,
    shared.test_packed_loss_with_explicit_noise_equals_the_generator_draws_in_order,
    shared.test_training_pieces_recombined_equal_the_loss,
], ids=lambda f: f.__name__[5:])
def test_the_shared_formulation_checks_hold_for_ddpm(check):
    check("ddpm")


def test_packed_loss_equals_each_sample_alone_under_the_papers_equations():
    torch.manual_seed(0)
    model = vfm_models.get_family("dit").create("tiny").eval()
    x0s = [torch.randn(4, 3, 4, 4), torch.randn(4, 1, 6, 8), torch.randn(4, 2, 4, 6)]
    y = torch.tensor([1, 2, 3])
    with torch.no_grad():
        packed = DDPM().loss_packed(model, x0s, {"y": y}, torch.Generator().manual_seed(0),
                                    torch.Generator().manual_seed(1), reduction="none")
        t0 = torch.randint(0, 1000, (3,), generator=torch.Generator().manual_seed(0))
        g_noise = torch.Generator().manual_seed(1)
        expected = []
        for i, x0 in enumerate(x0s):
            noise = torch.randn((1, *x0.shape), generator=g_noise)
            net = lambda x, t, cond, i=i: model(x, t, {"y": y[i : i + 1]})  # noqa: E731
            expected.append(ddpm_reference_elementwise(net, x0[None], t0[i : i + 1], noise).mean())
    torch.testing.assert_close(packed, torch.stack(expected), rtol=1e-4, atol=1e-5)


# --- learned sigma (out_channels = 2 x in_channels) in every formulation ------------------------


class LearnedSigma(nn.Module):
    """A real tiny DiT's prediction followed by C variance channels (a function of it, so a loss
    that read them would change and send them gradient): DiT's learn_sigma output layout."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.base = vfm_models.get_family("dit").create("tiny").eval()
        self.variance = nn.Parameter(torch.tensor(3.0))

    def forward(self, x, t, cond):
        out = self.base(x, t, cond)
        return torch.cat([out, self.variance * out.tanh()], 1)

    def forward_packed(self, latents, t, cond):
        return [torch.cat([o, self.variance * o.tanh()], 0) for o in self.base.forward_packed(latents, t, cond)]


@pytest.mark.parametrize("name", ["ddpm", "edm", "rectified-flow"])
def test_a_learned_sigma_output_trains_and_denoises_on_its_prediction_half(name):
    form = vfm_models.get_formulation(name)()
    model = LearnedSigma()
    x0, cond = torch.randn(2, 4, 2, 4, 4), {"y": torch.tensor([0, 3])}
    gens = lambda: (torch.Generator().manual_seed(3), torch.Generator().manual_seed(4))  # noqa: E731
    loss = form.loss(model, x0, cond, *gens())
    loss.backward()
    assert model.variance.grad == 0  # the variance half takes no part in the loss
    with torch.no_grad():
        torch.testing.assert_close(loss.detach(), form.loss(model.base, x0, cond, *gens()))
        p = form.training_pieces(x0, *gens())
        torch.testing.assert_close(weighted_mse(model(p.net_x, p.t, cond), p.target, p.weight), loss.detach(), rtol=1e-5, atol=1e-6)
        xs = [x0[0], x0[1, :, :1]]
        torch.testing.assert_close(form.loss_packed(model, xs, cond, *gens()), form.loss_packed(model.base, xs, cond, *gens()))
        level = torch.tensor([0.5, 0.9]) if name == "rectified-flow" else torch.tensor([3.0, 700.0])
        torch.testing.assert_close(form.denoise(model, x0, level, cond), form.denoise(model.base, x0, level, cond))


def test_an_output_of_another_channel_count_is_refused_with_what_is_accepted():
    three = lambda x, t, cond: torch.cat([x, x, x], 1)  # noqa: E731
    with pytest.raises(ValueError, match="12 channels for data of 4; accepted: 4, or 8"):
        DDPM().loss(three, torch.randn(1, 4, 1, 2, 2), {}, torch.Generator())
    with pytest.raises(ValueError, match="12 channels for data of 4"):
        vfm_models.get_formulation("edm")().denoise(three, torch.randn(1, 4, 1, 2, 2), 1.0, {})
