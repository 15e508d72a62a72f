"""Guidance against the null condition training used: the formula in x0 / eps / velocity space,
the default scale from the export, the negative prompt, and the unconditional pass skipped at 1."""

from __future__ import annotations

import pytest
import torch

import vfm_models
from vfm_infer.conditioning import Conditioner
from vfm_infer.guidance import classifier_free, default_scale
from vfm_infer.pipeline import GenerationSpec, VideoPipeline
from vfm_infer.samplers.edm import EDMHeun, churn_noise
from vfm_models.formulations import EDM, RectifiedFlow
from vfm_models.text_encoders.hashing import HashTextEncoder
from tests.infer.tiny import tiny_dit, tiny_meta


def test_cfg_on_edm_denoised_estimates_equals_cfg_on_eps():
    """D = x - sigma eps is affine in eps with a condition-free slope, so guiding D (vfm) is
    guiding eps (Ho & Salimans, with their w = scale - 1) at the same scale."""
    g = torch.Generator().manual_seed(0)
    x, sigma, scale = torch.randn(2, 5, generator=g), 1.7, 3.5
    eps_c, eps_u = torch.randn(2, 5, generator=g), torch.randn(2, 5, generator=g)
    D = lambda eps: x - sigma * eps  # noqa: E731
    guided_D = D(eps_u) + scale * (D(eps_c) - D(eps_u))
    guided_eps = (1 + (scale - 1)) * eps_c - (scale - 1) * eps_u
    torch.testing.assert_close(guided_D, D(guided_eps))


def test_cfg_on_flow_velocities_equals_cfg_on_eps_and_on_x0():
    """On the straight path x_s = (1 - s) x0 + s eps, v = eps - x0 and both eps and x0 are affine
    in v with condition-free slopes: guiding v is guiding eps and guiding x0, at the same scale."""
    g = torch.Generator().manual_seed(1)
    x, s, scale = torch.randn(3, 4, generator=g), torch.tensor(0.6), 2.5
    v_c, v_u = torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g)
    v_g = v_u + scale * (v_c - v_u)
    eps = lambda v: RectifiedFlow.eps_from_velocity(x[None], s, v[None])[0]  # noqa: E731
    x0 = lambda v: RectifiedFlow.x0_from_velocity(x[None], s, v[None])[0]  # noqa: E731
    torch.testing.assert_close(eps(v_g), eps(v_u) + scale * (eps(v_c) - eps(v_u)))
    torch.testing.assert_close(x0(v_g), x0(v_u) + scale * (x0(v_c) - x0(v_u)))


def test_guidance_one_skips_the_unconditional_pass():
    batches = []

    def net(x, level, cond):
        batches.append(x.shape[0])
        return x

    x, level = torch.zeros(1, 2), torch.ones(1)
    classifier_free(net, {"y": torch.tensor([1])}, {"y": torch.tensor([4])}, 1.0)(x, level)
    classifier_free(net, {"y": torch.tensor([1])}, {"y": torch.tensor([4])}, 2.0)(x, level)
    assert batches == [1, 2]


def test_the_default_scale_comes_from_the_export_and_is_one_without_a_trained_null():
    assert default_scale({"guidance": 2.5}) == 2.5
    assert default_scale({}) == 1.0  # an export from before condition dropout: its null never trained
    for name in ("edm", "rectified-flow"):
        assert vfm_models.get_formulation(name).default_guidance > 1


def test_the_pipeline_uses_the_exports_guidance_when_none_is_given():
    evaluations = []
    model = tiny_dit()
    model.register_forward_hook(lambda m, args, out: evaluations.append(args[0].shape[0]))
    for meta, batch in ((tiny_meta(guidance=3.0), 2), (tiny_meta(), 1)):
        evaluations.clear()
        pipe = VideoPipeline(model, meta)
        prepared = pipe.prepare(GenerationSpec(steps=2, sampler="edm-euler"), ["1"])
        assert prepared.spec.guidance == (3.0 if batch == 2 else 1.0)
        pipe.sample_latent(prepared, "1")
        assert set(evaluations) == {batch}  # guided: [cond; uncond] in one pass; unguided: cond alone
    explicit = VideoPipeline(model, tiny_meta(guidance=3.0)).prepare(GenerationSpec(steps=2, guidance=1.5), ["1"])
    assert explicit.spec.guidance == 1.5


def test_the_unconditional_branch_is_the_null_class_unless_a_negative_prompt_is_given():
    conditioner = Conditioner(tiny_dit().config, null={"kind": "class", "label": 4})
    cond, uncond = conditioner("2")
    assert cond["y"].tolist() == [2] and uncond["y"].tolist() == [4]
    assert conditioner("2", negative_prompt="3")[1]["y"].tolist() == [3]
    with pytest.raises(ValueError, match="class index"):
        conditioner.check("2", negative_prompt="cat")


def test_the_unconditional_branch_of_a_text_model_is_the_empty_caption_unless_negative():
    config = vfm_models.get_family("dit-cross").config("tiny")
    encoder = HashTextEncoder(dim=config.text_dim)
    conditioner = Conditioner(config, encoder, null={"kind": "text", "caption": ""})
    cond, uncond = conditioner("a red circle moving right")
    empty, mask = encoder.encode([""])
    # the empty caption, zero-padded (mask False) to the prompt's tokens as condition dropout pads it
    tokens = cond["text"].shape[1]
    assert uncond["text"].shape[1] == tokens > empty.shape[1]
    assert torch.equal(uncond["text"][:, :empty.shape[1]], empty) and not uncond["text"][:, empty.shape[1]:].any()
    assert torch.equal(uncond["text_mask"][:, :empty.shape[1]], mask) and not uncond["text_mask"][:, empty.shape[1]:].any()
    _, negative = conditioner("a red circle", negative_prompt="a blue square")
    assert torch.equal(negative["text"], encoder.encode(["a blue square"])[0])


def test_an_export_whose_null_condition_does_not_fit_its_model_is_refused():
    with pytest.raises(ValueError, match="null_condition .* does not match"):
        Conditioner(tiny_dit().config, null={"kind": "class", "label": 7})


def test_edm_churn_noise_follows_the_seed_and_lands_on_the_samples_device_and_dtype():
    like = torch.zeros(2, 3, dtype=torch.float64)
    a = churn_noise(like, torch.Generator().manual_seed(5))
    b = churn_noise(like, torch.Generator().manual_seed(5))
    assert torch.equal(a, b) and a.dtype == torch.float64 and a.device == like.device
    assert not torch.equal(a, churn_noise(like, torch.Generator().manual_seed(6)))
    assert churn_noise(like, None).shape == like.shape


def test_edm_churn_sampling_is_reproducible_per_seed():
    sampler = EDMHeun(4, churn=20.0)
    noise = torch.randn(2, 3, generator=torch.Generator().manual_seed(0))
    denoiser = lambda x, sigma: x / (1 + sigma[:, None] ** 2)  # noqa: E731

    def run(seed):
        return sampler.sample(denoiser, noise, generator=torch.Generator().manual_seed(seed))

    assert torch.equal(run(1), run(1)) and not torch.equal(run(1), run(2))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_edm_churn_on_cuda_with_a_host_generator_matches_the_cpu_sample():
    sampler = EDMHeun(4, churn=20.0)
    noise = torch.randn(2, 3, generator=torch.Generator().manual_seed(0))
    denoiser = lambda x, sigma: x / (1 + sigma[:, None] ** 2)  # noqa: E731
    cpu = sampler.sample(denoiser, noise, generator=torch.Generator().manual_seed(1))
    gpu = sampler.sample(denoiser, noise.cuda(), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(gpu.cpu(), cpu)


def test_formulations_state_their_default_guidance():
    assert EDM.default_guidance == vfm_models.get_formulation("edm").default_guidance
