"""EDM and rectified flow against direct implementations of the papers' equations."""

from __future__ import annotations

import math

import pytest
import torch

import vfm_models
from vfm_models.formulations import EDM, RectifiedFlow


class Recorder(torch.nn.Module):
    """F(x; t) = a * x + b * t, and remembers what it was called with."""

    def __init__(self, a: float = 0.3, b: float = 0.7) -> None:
        super().__init__()
        self.a, self.b = a, b
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []

    def forward(self, x, t, cond):
        self.calls.append((x.clone(), t.clone()))
        return self.a * x + self.b * t.view(-1, 1, 1, 1, 1)


def edm_reference_elementwise(net, y, rnd_normal, noise, P_mean=-1.2, P_std=1.2, sigma_data=0.5):
    """NVlabs/edm training/loss.py EDMLoss + networks.py EDMPrecond, written out line by line."""
    sigma = (rnd_normal * P_std + P_mean).exp().reshape(-1, 1, 1, 1, 1)
    weight = (sigma**2 + sigma_data**2) / (sigma * sigma_data) ** 2
    n = noise * sigma
    x = y + n
    c_skip = sigma_data**2 / (sigma**2 + sigma_data**2)
    c_out = sigma * sigma_data / (sigma**2 + sigma_data**2).sqrt()
    c_in = 1 / (sigma_data**2 + sigma**2).sqrt()
    c_noise = sigma.log() / 4
    F_x = net(c_in * x, c_noise.flatten(), {})
    D_yn = c_skip * x + c_out * F_x
    return weight * ((D_yn - y) ** 2)


def rf_reference_elementwise(net, x0, u, eps, shift):
    """SD3: logit-normal t, shifted t' = shift t / (1 + (shift - 1) t), z_t = (1 - t) x0 + t eps, v = eps - x0."""
    t = torch.sigmoid(u)
    t = shift * t / (1 + (shift - 1) * t)
    tb = t.reshape(-1, 1, 1, 1, 1)
    z = (1 - tb) * x0 + tb * eps
    return (net(z, t, {}) - (eps - x0)) ** 2


def draws(seed, batch, shape):
    """What a formulation draws: the level from ``generator`` first, then the noise from ``noise_generator``."""
    g_level, g_noise = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed + 1)
    return torch.randn(batch, generator=g_level), torch.randn(shape, generator=g_noise)


def test_edm_loss_equals_the_nvlabs_equations_with_and_without_a_mask():
    x0 = torch.randn(4, 2, 3, 4, 4)
    rnd, noise = draws(0, 4, x0.shape)
    ref = edm_reference_elementwise(Recorder(), x0, rnd, noise)
    edm = vfm_models.get_formulation("edm")()

    def run(**kw):
        g, gn = torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)
        return edm.loss(Recorder(), x0, {}, g, gn, **kw)

    torch.testing.assert_close(run(), ref.mean(), rtol=1e-5, atol=1e-6)
    mask = torch.zeros(4, 1, 3, 1, 1, dtype=torch.bool)
    mask[:, :, :2] = True  # the last frame of every sample is padding
    torch.testing.assert_close(run(mask=mask, reduction="none"), ref[:, :, :2].flatten(1).mean(1), rtol=1e-5, atol=1e-6)


def test_edm_passes_c_noise_and_c_in_scaled_input_to_the_network():
    edm = EDM()
    net = Recorder()
    x = torch.randn(2, 1, 1, 2, 2)
    sigma = torch.tensor([0.1, 20.0])
    D = edm.denoise(net, x, sigma, {})
    x_in, t = net.calls[0]
    torch.testing.assert_close(t, sigma.log() / 4)
    s = sigma.view(-1, 1, 1, 1, 1)
    torch.testing.assert_close(x_in, x / (0.25 + s**2).sqrt())
    expected = 0.25 / (s**2 + 0.25) * x + s * 0.5 / (s**2 + 0.25).sqrt() * net(x_in, t, {})
    torch.testing.assert_close(D, expected)


def test_edm_weight_gives_unit_loss_for_the_ideal_denoiser_of_gaussian_data():
    # For y ~ N(0, sigma_data^2 I) the ideal D(x; sigma) is c_skip(sigma) x, i.e. F = 0, and EDM's
    # lambda(sigma) makes the expected weighted error exactly 1 at every sigma (paper, section 5).
    edm = EDM()
    sigma = torch.logspace(-2, 1.5, 12)
    torch.testing.assert_close(edm.loss_weight(sigma) * edm.c_out(sigma) ** 2, torch.ones(12))
    g = torch.Generator().manual_seed(3)
    y = torch.randn(64, 4, 1, 16, 16, generator=g) * edm.sigma_data
    zero = lambda x, t, cond: torch.zeros_like(x)  # noqa: E731
    per_sample = edm.loss(zero, y, {}, g, reduction="none")
    assert per_sample.shape == (64,)
    assert abs(per_sample.mean().item() - 1.0) < 0.03


def test_edm_sigma_schedule_is_karras_eq5_and_training_sigma_is_lognormal():
    edm = EDM()
    s = edm.sigmas(18)
    i = torch.arange(18, dtype=torch.float64)
    expected = (80 ** (1 / 7) + i / 17 * (0.002 ** (1 / 7) - 80 ** (1 / 7))) ** 7
    torch.testing.assert_close(s[:-1], expected)
    assert s[-1] == 0 and s[0] == pytest.approx(80) and s[-2] == pytest.approx(0.002)
    log_sigma = edm.sample_sigma(20000, torch.Generator().manual_seed(0)).log()
    assert abs(log_sigma.mean().item() + 1.2) < 0.03 and abs(log_sigma.std().item() - 1.2) < 0.03


@pytest.mark.parametrize("shift", [1.0, 3.0])
def test_rectified_flow_loss_equals_the_sd3_equations(shift):
    x0 = torch.randn(4, 2, 3, 4, 4)
    u, eps = draws(5, 4, x0.shape)
    net = Recorder()
    ref = rf_reference_elementwise(net, x0, u, eps, shift)
    rf = vfm_models.get_formulation("rectified-flow")(shift=shift)
    g, gn = torch.Generator().manual_seed(5), torch.Generator().manual_seed(6)
    torch.testing.assert_close(rf.loss(Recorder(), x0, {}, g, gn), ref.mean(), rtol=1e-5, atol=1e-6)


def test_rectified_flow_ideal_velocity_reaches_the_analytic_minimum_loss():
    # x0 ~ N(0, I): E[eps - x0 | x_s] = (2s - 1) / ((1-s)^2 + s^2) x_s, with residual
    # MSE(s) = 2 - (2s - 1)^2 / ((1-s)^2 + s^2) per element.
    rf = RectifiedFlow()

    def ideal(x, s, cond):
        s = s.view(-1, 1, 1, 1, 1)
        return (2 * s - 1) / ((1 - s) ** 2 + s**2) * x

    g = torch.Generator().manual_seed(11)
    x0 = torch.randn(16, 4, 2, 16, 16, generator=g)
    s = rf.sample_s(16, torch.Generator().manual_seed(12))
    loss = rf.loss(ideal, x0, {}, torch.Generator().manual_seed(12), reduction="none")
    expected = 2 - (2 * s - 1) ** 2 / ((1 - s) ** 2 + s**2)
    torch.testing.assert_close(loss, expected, rtol=0.1, atol=0.0)


def test_rectified_flow_velocity_recovers_x0_and_eps_on_the_path():
    rf = RectifiedFlow(shift=2.0)
    x0, eps = torch.randn(3, 1, 1, 2, 2), torch.randn(3, 1, 1, 2, 2)
    s = torch.tensor([0.1, 0.5, 0.9])
    x_s = rf.interpolate(x0, eps, s.view(-1, 1, 1, 1, 1))
    v = rf.velocity_target(x0, eps)
    torch.testing.assert_close(rf.x0_from_velocity(x_s, s, v), x0)
    torch.testing.assert_close(rf.eps_from_velocity(x_s, s, v), eps)
    times = rf.times(8)
    assert times[0] == 1 and times[-1] == 0 and bool((times[1:] < times[:-1]).all())


@pytest.mark.parametrize("name", ["edm", "rectified-flow"])
def test_noise_level_comes_from_generator_and_noise_from_noise_generator(name):
    form = vfm_models.get_formulation(name)()
    x0 = torch.zeros(3, 1, 1, 2, 2)
    seen = []
    for noise_seed in (1, 2):
        net = Recorder(a=1.0, b=0.0)
        form.loss(net, x0, {}, torch.Generator().manual_seed(0), torch.Generator().manual_seed(noise_seed))
        seen.append(net.calls[0])
    torch.testing.assert_close(seen[0][1], seen[1][1])  # same t for both noise streams
    assert not torch.allclose(seen[0][0], seen[1][0])  # different noise


class TinyDenoiser(torch.nn.Module):
    def __init__(self, numel: int) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(numel + 3, 128), torch.nn.SiLU(), torch.nn.Linear(128, numel))

    def forward(self, x, t, cond):
        feats = torch.stack([t, torch.sin(3 * t), torch.cos(3 * t)], 1)
        return self.net(torch.cat([x.flatten(1), feats], 1)).view_as(x)


@pytest.mark.parametrize("name", ["edm", "rectified-flow"])
def test_training_a_tiny_denoiser_lowers_the_loss(name):
    torch.manual_seed(0)
    form = vfm_models.get_formulation(name)()
    pattern = torch.randn(1, 2, 1, 4, 4) * 0.5
    g_data = torch.Generator().manual_seed(1)

    def batch(n, g):  # a two-mode dataset: +pattern or -pattern, plus a little noise
        sign = torch.randint(0, 2, (n, 1, 1, 1, 1), generator=g) * 2 - 1
        return sign * pattern + 0.05 * torch.randn(n, 2, 1, 4, 4, generator=g)

    model = TinyDenoiser(32)
    eval_x = batch(512, torch.Generator().manual_seed(99))

    def eval_loss():
        with torch.no_grad():
            return form.loss(model, eval_x, {}, torch.Generator().manual_seed(7)).item()

    before = eval_loss()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(2)
    for _ in range(300):
        loss = form.loss(model, batch(64, g_data), {}, g)
        assert torch.isfinite(loss)
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = eval_loss()
    print(f"{name}: eval loss {before:.4f} -> {after:.4f}")
    assert after < 0.6 * before, (before, after)


def test_bad_options_and_shapes_are_errors_that_say_what_is_accepted():
    with pytest.raises(ValueError, match="sigma_min < sigma_max"):
        EDM(sigma_min=10, sigma_max=1)
    with pytest.raises(ValueError, match="does not broadcast"):
        EDM().loss(Recorder(), torch.randn(2, 1, 1, 2, 2), {}, None, mask=torch.ones(3, 1, 1, 1, 1))
    with pytest.raises(ValueError, match=r"scalar or shape \(2,\)"):
        EDM().denoise(Recorder(), torch.randn(2, 1, 1, 2, 2), torch.ones(3), {})
    assert math.isfinite(EDM().network_time(torch.tensor(0.5)).item())


@pytest.mark.parametrize("name", ["edm", "rectified-flow"])
def test_packed_loss_equals_each_sample_alone_under_the_paper_equations(name):
    # Real packed model (the dit family's forward_packed); samples of different grids.
    torch.manual_seed(0)
    model = vfm_models.get_family("dit").create("tiny").eval()
    x0s = [torch.randn(4, 3, 4, 4), torch.randn(4, 1, 6, 8), torch.randn(4, 2, 4, 6)]
    y = torch.tensor([1, 2, 3])
    form = vfm_models.get_formulation(name)()
    with torch.no_grad():
        packed = form.loss_packed(
            model, x0s, {"y": y}, torch.Generator().manual_seed(0), torch.Generator().manual_seed(1), reduction="none"
        )
        g_level, g_noise = torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)
        level_normal = torch.randn(3, generator=g_level)
        expected = []
        for i, x0 in enumerate(x0s):
            noise = torch.randn((1, *x0.shape), generator=g_noise)
            net = lambda x, t, cond, i=i: model(x, t, {"y": y[i : i + 1]})  # noqa: E731
            if name == "edm":
                err = edm_reference_elementwise(net, x0[None], level_normal[i : i + 1], noise)
            else:
                err = rf_reference_elementwise(net, x0[None], level_normal[i : i + 1], noise, shift=1.0)
            expected.append(err.mean())
    torch.testing.assert_close(packed, torch.stack(expected), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["edm", "rectified-flow"])
def test_explicit_noise_gives_the_loss_of_the_generator_that_drew_it(name):
    form = vfm_models.get_formulation(name)()
    x0 = torch.randn(3, 2, 2, 4, 4)
    drawn = torch.randn(x0.shape, generator=torch.Generator().manual_seed(5))
    by_generator = form.loss(Recorder(), x0, {}, torch.Generator().manual_seed(0), torch.Generator().manual_seed(5))
    by_tensor = form.loss(Recorder(), x0, {}, torch.Generator().manual_seed(0), noise=drawn)
    other = form.loss(Recorder(), x0, {}, torch.Generator().manual_seed(0), noise=-drawn)
    assert by_tensor.item() == by_generator.item()
    assert other.item() != by_tensor.item()
    with pytest.raises(ValueError, match="does not match the data shape"):
        form.loss(Recorder(), x0, {}, torch.Generator().manual_seed(0), noise=drawn[:, :1])
    with pytest.raises(ValueError, match="not both"):
        form.loss(Recorder(), x0, {}, torch.Generator(), torch.Generator(), noise=drawn)


@pytest.mark.parametrize("name", ["edm", "rectified-flow"])
def test_packed_loss_with_explicit_noise_equals_the_generator_draws_in_order(name):
    torch.manual_seed(0)
    model = vfm_models.get_family("dit").create("tiny").eval()
    x0s = [torch.randn(4, 2, 4, 4), torch.randn(4, 1, 6, 8)]
    g_noise = torch.Generator().manual_seed(1)
    noise = [torch.randn(x.shape, generator=g_noise) for x in x0s]
    form = vfm_models.get_formulation(name)()
    with torch.no_grad():
        drawn = form.loss_packed(model, x0s, {"y": torch.tensor([1, 2])}, torch.Generator().manual_seed(0),
                                 torch.Generator().manual_seed(1), reduction="none")
        given = form.loss_packed(model, x0s, {"y": torch.tensor([1, 2])}, torch.Generator().manual_seed(0),
                                 noise=noise, reduction="none")
    torch.testing.assert_close(given, drawn, rtol=0, atol=0)
    with pytest.raises(ValueError, match="give one per sample"):
        form.loss_packed(model, x0s, {}, torch.Generator(), noise=noise[:1])


@pytest.mark.parametrize("name", ["edm", "rectified-flow"])
def test_training_pieces_recombined_equal_the_loss(name):
    from vfm_models.formulations import weighted_mse

    torch.manual_seed(0)
    model = vfm_models.get_family("dit").create("tiny").eval()
    x0, cond = torch.randn(3, 4, 2, 4, 4), {"y": torch.tensor([0, 1, 2])}
    form = vfm_models.get_formulation(name)()
    with torch.no_grad():
        loss = form.loss(model, x0, cond, torch.Generator().manual_seed(3), torch.Generator().manual_seed(4))
        p = form.training_pieces(x0, torch.Generator().manual_seed(3), torch.Generator().manual_seed(4))
        recombined = weighted_mse(model(p.net_x, p.t, cond), p.target, p.weight)
    assert p.net_x.shape == p.target.shape == x0.shape and p.t.shape == (3,) and p.weight.shape == (3, 1, 1, 1, 1)
    torch.testing.assert_close(recombined, loss, rtol=1e-5, atol=1e-6)
    if name == "edm":  # lambda(sigma) c_out(sigma)^2 = 1: EDM's weight equalises the levels
        torch.testing.assert_close(p.weight, torch.ones_like(p.weight))


def test_rectified_flow_uniform_fraction_mixes_uniform_levels_into_the_draws_and_zero_draws_as_before():
    plain, mixed = RectifiedFlow(shift=3.0), RectifiedFlow(shift=3.0, uniform_fraction=0.25)
    g = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    u = torch.randn(20_000, generator=g())
    assert torch.equal(RectifiedFlow(shift=3.0, uniform_fraction=0.0).sample_s(20_000, g()), plain.sample_s(20_000, g()))
    assert torch.equal(plain.sample_s(20_000, g()), plain.shift_time(torch.sigmoid(u)))
    low = lambda s: (s < 0.2).float().mean().item()  # noqa: E731
    # shift 3 leaves the low-noise levels almost undrawn; a quarter of uniform draws puts 5% there
    assert low(plain.sample_s(20_000, g())) < 0.01
    assert abs(low(mixed.sample_s(20_000, g())) - (0.25 * 0.2 + 0.75 * low(plain.sample_s(20_000, g())))) < 0.01
    assert mixed.options()["uniform_fraction"] == 0.25
    assert "uniform_fraction" not in plain.options()  # exports without it read as before

    class Narrower(RectifiedFlow):  # a plugin's subclass whose __init__ predates the option
        def __init__(self, logit_mean: float = 0.0, logit_std: float = 1.0, shift: float = 3.0) -> None:
            super().__init__(logit_mean, logit_std, shift)

    assert Narrower(**Narrower().options()).options() == {"logit_mean": 0.0, "logit_std": 1.0, "shift": 3.0}
    with pytest.raises(ValueError, match=r"uniform_fraction is a share of the training draws, in \[0, 1\]; got 1.5"):
        RectifiedFlow(uniform_fraction=1.5)
