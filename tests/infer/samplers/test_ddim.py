"""The DDPM samplers (ddim, vp-ode): the shared analytic oracle tests, then step-for-step parity with
diffusers' DDIMScheduler and DPMSolverMultistepScheduler driven by the same noise network."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import vfm_infer
from vfm_infer.guidance import classifier_free
from vfm_models.formulations.ddpm import DDPM
from tests.infer.analytic import GaussianMixture
from tests.infer.samplers.mixin import ODESamplerTestMixin, SamplerTestMixin

diffusers = pytest.importorskip("diffusers")


# --- the analytic oracle (tests/infer/analytic.py: exact eps of Gaussian-mixture data) -------------


class TestDDIM(ODESamplerTestMixin):
    sampler_name = "ddim"
    mixture_steps = 128


class TestDDIMTrailing(ODESamplerTestMixin):
    sampler_name = "ddim"
    options = {"timestep_spacing": "trailing"}
    mixture_steps = 128


class TestDDIMStochastic(SamplerTestMixin):
    sampler_name = "ddim"
    options = {"eta": 1.0}
    mixture_steps = 200


class TestVPODE(SamplerTestMixin):
    sampler_name = "vp-ode"


class TestVPODEOrder(ODESamplerTestMixin):
    """The solver is second order in the log-SNR step h. Two things of the DDPM grid hide that at
    small N, so this fits the order on the leading spacing (last timestep 0, sigma 0.01) at 50..400
    steps against the right reference:
    - the last step (to clean data, lambda = +inf) returns the denoised estimate D at the last
      timestep, as diffusers' DPMSolverMultistepScheduler does, which differs from the ODE's
      endpoint by O(sigma_last^2); the exact reference is therefore the closed-form ODE solution at
      the last timestep, then D there;
    - timesteps spread uniformly in t give log-SNR steps near t = 0 that shrink slowly with N (on
      the linspace grid the first interval is always t = T/N -> 2T/N, h = ln(2)/2)."""

    sampler_name = "vp-ode"
    options = {"timestep_spacing": "leading"}
    order_steps = (50, 100, 200, 400)

    def ode_reference(self, sampler, mean, std, noise):
        first, last = (float(t) for t in sampler.levels()[[0, -2]])
        sigma_first, sigma_last = (float(DDPM().sigma_ve(t)) for t in (first, last))
        y_first = noise / float(DDPM().alpha_bar(first)) ** 0.5  # x / sqrt(abar) = x0 + sigma eps
        y_last = mean + (std**2 + sigma_last**2) ** 0.5 / (std**2 + sigma_first**2) ** 0.5 * (y_first - mean)
        return GaussianMixture.single(mean, std).edm_denoiser(y_last, torch.full((len(noise),), sigma_last, dtype=torch.float64))


def test_ddim_and_vp_ode_are_registered_for_ddpm_and_the_pipeline_defaults_to_ddim():
    from vfm_infer.pipeline import DEFAULT_SAMPLERS

    assert vfm_infer.host.get("samplers", "ddim").formulation == "ddpm"
    assert vfm_infer.host.get("samplers", "vp-ode").formulation == "ddpm"
    assert DEFAULT_SAMPLERS["ddpm"] == "ddim"


@pytest.mark.parametrize("name", ["ddim", "vp-ode"])
def test_the_pipeline_gives_the_sampler_the_exports_beta_schedule(name):
    from vfm_infer.pipeline import VideoPipeline
    from tests.infer.tiny import tiny_dit, tiny_meta

    options = {"num_train_timesteps": 500, "beta_start": 0.00085, "beta_end": 0.012, "beta_schedule": "scaled_linear"}
    pipe = VideoPipeline(tiny_dit(), tiny_meta("ddpm", formulation_options=options))
    sampler = pipe.make_sampler(name, 10, {})
    assert sampler.schedule.options() == options
    assert torch.equal(sampler.schedule.alphas_cumprod, DDPM(**options).alphas_cumprod)
    assert sampler.levels()[0] <= 500


def test_bad_sampler_options_name_what_is_accepted():
    get = lambda name: vfm_infer.host.get("samplers", name)  # noqa: E731
    with pytest.raises(ValueError, match=r"eta must be a number in \[0, 1\]"):
        get("ddim")(10, eta=-0.5)
    with pytest.raises(ValueError, match="timestep spacing must be one of leading, trailing, linspace"):
        get("ddim")(10, timestep_spacing="uniform")
    with pytest.raises(ValueError, match=r"integer in \[1, 1000\]"):
        get("vp-ode")(1001)
    with pytest.raises(ValueError, match="beta_schedule must be one of"):
        get("ddim")(10, beta_schedule="cosine")
    with pytest.raises(ValueError, match="distinct timesteps"):
        get("ddim")(10, steps_offset=150)


# --- parity with diffusers ----------------------------------------------------------------------

C, H, W, CLASSES = 4, 6, 6, 3


class TinyEps(nn.Module):
    """eps(x, t, y) on (B, C, T, H, W) with a learned-sigma output (2C channels: the variance half
    must not matter): the exact noise of data N(m_y, 0.5^2 I) (class means m_y, the null class's
    m = 0) plus a small random conv net of x, t and y, so samples stay O(1) and an absolute
    tolerance means something (a purely random eps makes DDIM's x0 estimates grow like 1/sqrt(abar))."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.means = nn.Embedding(CLASSES + 1, C)  # the last row is the null class
        with torch.no_grad():
            self.means.weight[-1] = 0
        self.inp = nn.Conv3d(C, 16, (1, 3, 3), padding=(0, 1, 1))
        self.time = nn.Linear(4, 16)
        self.label = nn.Embedding(CLASSES + 1, 16)
        self.out = nn.Conv3d(16, 2 * C, (1, 3, 3), padding=(0, 1, 1))
        self.register_buffer("abar", DDPM().alphas_cumprod[1:].to(torch.float32))  # at t = 0..999

    def forward(self, x, t, cond):
        a = self.abar[t.long()].view(-1, 1, 1, 1, 1)
        m = self.means(cond["y"])[:, :, None, None, None]
        exact = (1 - a).sqrt() * (x - a.sqrt() * m) / (a * 0.25 + 1 - a)
        t = t.to(torch.float32)
        feats = torch.stack([torch.sin(t / 50), torch.cos(t / 50), torch.sin(t / 7), t / 1000], 1)
        h = self.inp(x) + (self.time(feats) + self.label(cond["y"]))[:, :, None, None, None]
        learned = 0.1 * torch.tanh(self.out(torch.nn.functional.silu(h)))
        return torch.cat([exact + learned[:, :C], learned[:, C:]], 1)


def _vfm(sampler, net, noise, labels, guidance, seed):
    """vfm: the formulation's denoiser, classifier-free guidance and the sampler, as VideoPipeline runs them."""
    form = DDPM()
    cond, uncond = {"y": labels}, {"y": torch.full_like(labels, CLASSES)}
    denoiser = classifier_free(lambda x, level, c: form.denoise(net, x, level, c), cond, uncond, guidance)
    with torch.no_grad():
        return sampler.sample(denoiser, noise[:, :, None], generator=torch.Generator().manual_seed(seed))[:, :, 0]


def _diffusers(scheduler, steps, net, noise, labels, guidance, seed, **step_kwargs):
    """diffusers: DiTPipeline's loop (eps half of the learned-sigma output, guidance on it) on 2-D latents."""
    scheduler.set_timesteps(steps)
    generator = torch.Generator().manual_seed(seed)
    x = noise * scheduler.init_noise_sigma
    null = torch.full_like(labels, CLASSES)
    with torch.no_grad():
        for t in scheduler.timesteps:
            if guidance > 1:
                out = net(torch.cat([x, x])[:, :, None], t.expand(2 * len(x)), {"y": torch.cat([labels, null])})[:, :, 0]
                c, u = out[:, :C].chunk(2)
                eps = u + guidance * (c - u)
            else:
                eps = net(x[:, :, None], t.expand(len(x)), {"y": labels})[:, :C, 0]
            if step_kwargs:
                x = scheduler.step(eps, t, x, generator=generator, **step_kwargs).prev_sample
            else:
                x = scheduler.step(eps, t, x).prev_sample
    return x


DDIM_CASES = [  # (steps, eta, spacing, steps_offset, guidance)
    (50, 0.0, "leading", 0, 1.0),
    (25, 0.0, "leading", 0, 4.0),
    (50, 0.0, "leading", 1, 1.5),
    (20, 0.0, "trailing", 0, 1.0),
    (25, 1.0, "leading", 0, 4.0),
    (50, 0.5, "leading", 0, 1.0),
]


@pytest.mark.parametrize(("steps", "eta", "spacing", "offset", "guidance"), DDIM_CASES,
                         ids=[f"{s}steps-eta{e}-{sp}-offset{o}-cfg{g}" for s, e, sp, o, g in DDIM_CASES])
def test_ddim_equals_diffusers_ddim_scheduler_on_the_same_noise(steps, eta, spacing, offset, guidance):
    net = TinyEps().eval()
    noise = torch.randn(2, C, H, W, generator=torch.Generator().manual_seed(1))
    labels = torch.tensor([0, 2])
    sampler = vfm_infer.host.get("samplers", "ddim")(steps, eta=eta, timestep_spacing=spacing, steps_offset=offset)
    ours = _vfm(sampler, net, noise, labels, guidance, seed=7)
    # DiT's scheduler config: diffusers' defaults (set_alpha_to_one, steps_offset 0, leading) without clipping.
    scheduler = diffusers.DDIMScheduler(num_train_timesteps=1000, beta_start=1e-4, beta_end=0.02, beta_schedule="linear",
                                        clip_sample=False, set_alpha_to_one=True, steps_offset=offset,
                                        timestep_spacing=spacing)
    theirs = _diffusers(scheduler, steps, net, noise, labels, guidance, seed=7, **({"eta": eta} if eta else {}))
    # The same timesteps, first to last: vfm's levels are diffusers' timesteps + 1, then 0.
    assert sampler.levels()[:-1].tolist() == (scheduler.timesteps + 1).tolist()
    diff = (ours - theirs).abs().max().item()
    print(f"ddim {steps} steps eta {eta} {spacing} offset {offset} guidance {guidance}: max |vfm - diffusers| = {diff:.2e}")
    assert theirs.abs().max() > 0.1 and diff < 1e-4


@pytest.mark.parametrize(("steps", "guidance"), [(25, 1.0), (10, 4.0), (50, 1.0)])
def test_vp_ode_equals_diffusers_dpm_solver_multistep_defaults(steps, guidance):
    net = TinyEps().eval()
    noise = torch.randn(2, C, H, W, generator=torch.Generator().manual_seed(2))
    labels = torch.tensor([1, 0])
    sampler = vfm_infer.host.get("samplers", "vp-ode")(steps)
    ours = _vfm(sampler, net, noise, labels, guidance, seed=0)
    scheduler = diffusers.DPMSolverMultistepScheduler(num_train_timesteps=1000, beta_start=1e-4, beta_end=0.02,
                                                      beta_schedule="linear")
    theirs = _diffusers(scheduler, steps, net, noise, labels, guidance, seed=0)
    assert sampler.levels()[:-1].tolist() == (scheduler.timesteps + 1).tolist()
    diff = (ours - theirs).abs().max().item()
    print(f"vp-ode {steps} steps guidance {guidance}: max |vfm - diffusers DPM-Solver++(2M)| = {diff:.2e}")
    assert theirs.abs().max() > 0.1 and diff < 1e-4


def test_the_variance_half_of_a_learned_sigma_output_does_not_change_the_sample():
    net = TinyEps().eval()
    noise = torch.randn(1, C, H, W, generator=torch.Generator().manual_seed(3))
    labels = torch.tensor([1])
    sampler = vfm_infer.host.get("samplers", "ddim")(10)
    plain = _vfm(sampler, net, noise, labels, 2.0, seed=0)
    with torch.no_grad():
        net.out.bias[C:] += 1.0  # only the variance channels
    assert torch.equal(_vfm(sampler, net, noise, labels, 2.0, seed=0), plain)


# --- end to end: a converted diffusers DiT through vfm's pipeline vs diffusers' DiT loop -----------


def _dit_folder(path):
    """A tiny random class-conditional diffusers DiT with learned sigma (3 -> 6 channels), saved by
    diffusers itself. 1000 classes so the null class is DiTPipeline's 1000. Block 0's
    timestep/class embedder is copied into the others, as diffusers' own DiT converter does."""
    torch.manual_seed(0)
    model = diffusers.DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=16, in_channels=3, out_channels=6,
                                            num_layers=2, sample_size=8, patch_size=2, num_embeds_ada_norm=1000).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.1)  # every parameter drawn: adaLN-Zero's zeros would hide errors
        shared = model.transformer_blocks[0].norm1.emb.state_dict()
        for block in model.transformer_blocks[1:]:
            block.norm1.emb.load_state_dict(shared)
    model.save_pretrained(path)
    return model


def _dit_pipeline_loop(transformer, steps, noise, label, guidance):
    """diffusers 0.42 DiTPipeline.__call__'s loop, without the VAE decode: the [x; x] batch with the
    null class 1000, guidance on the noise half, the learned-sigma split, DDIMScheduler.step. The
    scheduler is DiT's (diffusers' DiT converter): linear betas, 1000 steps, clip_sample=False and
    diffusers' defaults set_alpha_to_one=True, steps_offset=0, leading spacing."""
    scheduler = diffusers.DDIMScheduler(num_train_timesteps=1000, beta_schedule="linear", prediction_type="epsilon",
                                        clip_sample=False)
    channels = transformer.config.in_channels
    latents = noise
    latent_model_input = torch.cat([latents] * 2) if guidance > 1 else latents
    class_labels = torch.tensor([label])
    class_labels_input = torch.cat([class_labels, torch.tensor([1000])]) if guidance > 1 else class_labels
    scheduler.set_timesteps(steps)
    with torch.no_grad():
        for t in scheduler.timesteps:
            if guidance > 1:
                half = latent_model_input[: len(latent_model_input) // 2]
                latent_model_input = torch.cat([half, half], dim=0)
            timesteps = t[None].expand(latent_model_input.shape[0])
            noise_pred = transformer(latent_model_input, timestep=timesteps, class_labels=class_labels_input).sample
            if guidance > 1:
                eps, rest = noise_pred[:, :channels], noise_pred[:, channels:]
                cond_eps, uncond_eps = torch.split(eps, len(eps) // 2, dim=0)
                half_eps = uncond_eps + guidance * (cond_eps - uncond_eps)
                eps = torch.cat([half_eps, half_eps], dim=0)
                noise_pred = torch.cat([eps, rest], dim=1)
            model_output, _ = torch.split(noise_pred, channels, dim=1)
            latent_model_input = scheduler.step(model_output, t, latent_model_input).prev_sample
    return latent_model_input.chunk(2)[0] if guidance > 1 else latent_model_input


@pytest.mark.parametrize(("steps", "guidance"), [(50, 1.0), (25, 4.0)])
def test_a_converted_diffusers_dit_samples_through_vfm_as_diffusers_ddim_does(tmp_path, steps, guidance):
    from vfm_infer.pipeline import GenerationSpec, VideoPipeline
    from vfm_models.adapters.exports import convert_to_export

    reference_model = _dit_folder(tmp_path / "diffusers")
    export = convert_to_export(tmp_path / "diffusers", tmp_path / "export",
                               meta={"tokenizer": "pixel", "tokenizer_options": {"patch": 1}})
    pipe = VideoPipeline.from_export(export)  # what `vfm generate --checkpoint` loads
    assert pipe.meta["formulation"] == "ddpm" and pipe.model.config.learned_sigma
    seed, label = 3, 7
    prepared = pipe.prepare(GenerationSpec(steps=steps, guidance=guidance, seed=seed), [str(label)])
    assert isinstance(prepared.sampler, vfm_infer.host.get("samplers", "ddim"))  # the ddpm default
    ours = pipe.sample_latent(prepared, str(label))[:, :, 0]  # (1, C, T=1, H, W) -> an image latent
    noise = torch.randn((1, *prepared.latent_shape), generator=torch.Generator().manual_seed(seed))[:, :, 0]
    theirs = _dit_pipeline_loop(reference_model, steps, noise, label, guidance)
    diff = (ours - theirs).abs().max().item()
    scale = theirs.abs().max().item()
    print(f"converted DiT, ddim {steps} steps, guidance {guidance}: max |vfm - diffusers| = {diff:.2e} "
          f"(max |sample| {scale:.1f}, relative {diff / scale:.1e})")
    # An untrained DiT's eps is not the noise, so DDIM's x0 estimates grow like 1 / sqrt(abar) (~150)
    # and the sample reaches |x| ~ 400, where one fp32 rounding is 3e-5 and the two forwards' fp32
    # differences (~1e-6 a call) grow with it (diffusers' float32 betas instead of vfm's float64 ones
    # change nothing measurable): the check is relative to the sample's scale, as 1e-4 is of an O(1)
    # latent (the O(1) samples of TinyEps above agree to 4e-6 absolute). Off by one in the network's
    # t, the relative difference is 2e-2.
    assert scale > 10 and diff < 1e-6 * scale


# --- train with the ddpm formulation, then sample: the colour-field round trip ---------------------


@pytest.mark.slow
def test_a_ddpm_trained_dit_samples_its_class_colours_with_ddim_and_vp_ode(tmp_path):
    """tests/cli/test_round_trip.py's data and model (a class is a constant colour field), trained
    with the ddpm formulation. Its uniform timesteps learn this slower than EDM's levels: 1200 steps
    (max error 0.43 after the round trip's 400, whatever the sampler and its steps; 0.27 after 1000,
    0.20 after 1200; the tolerance is 0.3)."""
    import tests.cli.test_round_trip as rt
    from vfm_infer.pipeline import GenerationSpec, VideoPipeline
    from vfm_parallel.trainer import from_dict, train

    config = rt._config(tmp_path, "edm")
    config["model"].update(formulation="ddpm", formulation_options={})
    config["train"]["steps"] = 1200
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 4-token model: threads only add overhead
    try:
        pipe = VideoPipeline.from_export(train(from_dict(config, 1), rt._build).export)
    finally:
        torch.set_num_threads(threads)
    assert pipe.meta["formulation"] == "ddpm" and pipe.meta["guidance"] == DDPM.default_guidance
    for sampler in ("ddim", "vp-ode"):
        for guidance in (1.0, None):  # None: the export's default, 4
            means = torch.stack([torch.stack([
                pipe.generate(str(k), GenerationSpec(sampler=sampler, steps=25, guidance=guidance, seed=seed)).flatten(1).mean(1)
                for seed in (0, 1)]) for k in range(len(rt.COLOURS))])
            print(f"{sampler}, guidance {guidance}: max error {(means - rt.COLOURS[:, None]).abs().max():.3f}")
            rt._assert_on_the_data(means, f"{sampler}, guidance {guidance}")
