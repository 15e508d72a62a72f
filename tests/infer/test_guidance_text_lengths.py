"""Batched classifier-free guidance equals the two separate passes for every family that takes text,
when the prompt and the negative prompt encode to texts of different lengths (batching pads the
shorter one)."""

from __future__ import annotations

import pytest
import torch
import vfm_models

from vfm_infer.guidance import classifier_free, combine, concat_conditions

TEXT_FAMILIES = ["dit-cross", "moviegen", "stdit", "wan"]


def _random_model_of(name: str, **options) -> torch.nn.Module:
    torch.manual_seed(0)
    model = vfm_models.get_family(name).create("tiny", **options).eval()
    with torch.no_grad():  # adaLN-Zero starts every block as the identity and the output at 0
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    return model


def _texts(text_dim: int, lengths: tuple[int, int], masks: bool):
    g = torch.Generator().manual_seed(1)
    cond = {"text": torch.randn(1, lengths[0], text_dim, generator=g)}
    uncond = {"text": torch.randn(1, lengths[1], text_dim, generator=g)}
    if masks:
        for c in (cond, uncond):
            c["text_mask"] = torch.ones(c["text"].shape[:2], dtype=torch.bool)
    return cond, uncond


@pytest.mark.parametrize("masks", [True, False], ids=["with-masks", "text-alone"])
@pytest.mark.parametrize("name", TEXT_FAMILIES)
def test_batched_cfg_equals_separate_passes_for_texts_of_different_lengths(name, masks):
    model = _random_model_of(name)
    cond, uncond = _texts(model.config.text_dim, (7, 2), masks)
    channels = model.config.in_channels
    x, level = torch.randn(1, channels, 2, 4, 4, generator=torch.Generator().manual_seed(2)), torch.full((1,), 0.6)
    net = lambda x, level, c: model(x, level, c)  # noqa: E731
    plan = model.parallel_plan()
    with torch.no_grad():
        guided = classifier_free(net, cond, uncond, 4.0, masks_text_padding=plan.masks_text_padding)(x, level)
        separate = combine(net(x, level, cond), net(x, level, uncond), 4.0)
    assert separate.abs().max() > 1e-2  # a model whose output is ~0 would pass anything
    torch.testing.assert_close(guided, separate, rtol=1e-5, atol=1e-5)


def test_concat_conditions_masks_the_padding_of_texts_given_without_masks():
    both = concat_conditions({"text": torch.ones(1, 3, 2)}, {"text": torch.ones(1, 1, 2)})
    assert both["text_mask"].tolist() == [[True, True, True], [True, False, False]]


def test_a_wan_pipeline_guides_a_prompt_and_a_shorter_negative_prompt_as_two_separate_passes():
    """Wan attends to its text padding: the pipeline's batched CFG must not pad the negative prompt."""
    from vfm_infer.pipeline import GenerationSpec

    from tests.infer.tiny import LATENT_SHAPE

    pipe = _pipeline(_random_model_of("wan", in_channels=LATENT_SHAPE[0], patch=(1, 2, 2)), "wan")
    spec = GenerationSpec(steps=2, guidance=4.0, seed=3, negative_prompt="fog")
    prompt = "a red fox jumps over a sleeping dog"
    prepared = pipe.prepare(spec, [prompt])
    cond, uncond = pipe.conditioner(prompt, spec.negative_prompt)
    assert cond["text"].shape[1] != uncond["text"].shape[1]
    net = pipe._net()
    noise = torch.randn((1, *prepared.latent_shape), generator=torch.Generator().manual_seed(spec.seed))
    with torch.no_grad():
        separate = prepared.sampler.sample(lambda x, level: combine(net(x, level, cond), net(x, level, uncond), 4.0),
                                           noise)
    torch.testing.assert_close(pipe.sample_latent(prepared, prompt), separate, rtol=1e-5, atol=1e-5)


def _pipeline(model: torch.nn.Module, family: str):
    """A pipeline of ``model`` with the hash text encoder, whose texts are as long as their words."""
    from vfm_infer.pipeline import VideoPipeline
    from vfm_models.conditioning import describe

    from tests.infer.tiny import tiny_meta

    meta = tiny_meta(family=family, formulation="rectified-flow", config=model.config, null_condition=describe(model.config),
                     text_encoder="hash", text_encoder_options={"dim": model.config.text_dim})
    return VideoPipeline(model, meta)


@pytest.mark.parametrize("name", ["dit-cross", "moviegen", "stdit"])
def test_a_pipeline_whose_model_masks_its_text_padding_guides_texts_of_different_lengths_in_one_batched_pass(name):
    """The default families' plans say they mask text padding: CFG against the (one-token) null
    condition stays one forward pass of batch 2 per step, not two passes."""
    from vfm_infer.pipeline import GenerationSpec

    from tests.infer.tiny import LATENT_SHAPE

    pipe = _pipeline(_random_model_of(name, in_channels=LATENT_SHAPE[0]), name)
    batches = []
    net = pipe._net()
    pipe._net = lambda: lambda x, level, cond: batches.append(x.shape[0]) or net(x, level, cond)
    spec = GenerationSpec(steps=2, guidance=4.0, seed=3)
    prompt = "a red fox jumps over a sleeping dog"
    cond, _ = pipe.conditioner(prompt, spec.negative_prompt)
    assert cond["text"].shape[1] != pipe.conditioner.null["text"].shape[1]
    pipe.sample_latent(pipe.prepare(spec, [prompt]), prompt)
    assert batches == [2, 2]
