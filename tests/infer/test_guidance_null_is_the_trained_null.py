"""Guidance's unconditional branch is the null condition exactly as training's condition dropout fed it
(vfm_models.conditioning.with_null: the empty caption zero-padded to the batch's captions), also for a
model that attends to its text padding (wan without use_text_mask), where the empty caption alone at its
own length is another input: batched CFG, CFG-parallel and a precomputed conditioner alike."""

from __future__ import annotations

import pytest
import torch
import vfm_models
from vfm_models.conditioning import describe, null_condition, with_null

from vfm_infer.guidance import combine
from vfm_infer.pipeline import GenerationSpec, ParallelLayout, VideoPipeline

from tests.gloo import spawn as run_on_ranks
from tests.infer.tiny import LATENT_SHAPE, tiny_meta

PROMPT = "a red fox jumps over a sleeping dog"  # 8 hash tokens; the empty caption is 1


def _model(family: str) -> torch.nn.Module:
    torch.manual_seed(0)
    model = vfm_models.get_family(family).create("tiny", in_channels=LATENT_SHAPE[0], patch=(1, 2, 2)).eval()
    with torch.no_grad():  # adaLN-Zero starts every block as the identity and the output at 0
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    return model


def _pipeline(model: torch.nn.Module, family: str, parallel: ParallelLayout | None = None) -> VideoPipeline:
    """As `vfm generate` builds it from an export trained on the `hash` encoder's (unpadded) texts."""
    meta = tiny_meta(family=family, formulation="rectified-flow", config=model.config,
                     null_condition=describe(model.config), text_encoder="hash",
                     text_encoder_options={"dim": model.config.text_dim})
    return VideoPipeline(model, meta, parallel=parallel)


def _trained_null(pipe: VideoPipeline, cond: dict) -> dict:
    """What condition dropout feeds the model for this prompt's sample when it drops it."""
    null = null_condition(pipe.model.config, pipe.conditioner.text_encoder)
    return with_null(cond, null, torch.tensor([True]))


def _sample(pipe: VideoPipeline, guidance: float, branches) -> tuple[torch.Tensor, torch.Tensor]:
    """(the pipeline's latent, the latent of a denoiser ``branches(net, x, level)`` from the same noise)."""
    spec = GenerationSpec(steps=2, guidance=guidance, seed=3)
    prepared = pipe.prepare(spec, [PROMPT])
    net = pipe._net()
    noise = torch.randn((1, *prepared.latent_shape), generator=torch.Generator().manual_seed(spec.seed))
    with torch.no_grad():
        expected = prepared.sampler.sample(lambda x, level: branches(net, x, level), noise)
    return pipe.sample_latent(prepared, PROMPT), expected


@pytest.mark.parametrize("family", ["wan", "dit-cross"], ids=["attends-to-padding", "masks-padding"])
def test_the_unconditional_prediction_is_the_models_prediction_on_what_condition_dropout_fed_it(family):
    pipe = _pipeline(_model(family), family)
    assert pipe._masks_text_padding() == (family == "dit-cross")
    cond, _ = pipe.conditioner(PROMPT)
    trained_null = _trained_null(pipe, cond)
    alone = null_condition(pipe.model.config, pipe.conditioner.text_encoder)
    assert alone["text"].shape[1] < trained_null["text"].shape[1] == cond["text"].shape[1]
    # guidance 0: the unconditional branch alone
    latent, expected = _sample(pipe, 0.0, lambda net, x, level: net(x, level, trained_null))
    torch.testing.assert_close(latent, expected, rtol=1e-5, atol=1e-5)
    # guidance 4: one batched pass of [prompt; null]
    latent, expected = _sample(pipe, 4.0, lambda net, x, level: combine(net(x, level, cond), net(x, level, trained_null), 4.0))
    torch.testing.assert_close(latent, expected, rtol=1e-5, atol=1e-5)
    assert expected.abs().max() > 1e-2  # a model whose output is ~0 would pass anything


def test_a_precomputed_conditioner_holds_the_null_condition_dropout_fed():
    pipe = _pipeline(_model("wan"), "wan")
    cond, _ = pipe.conditioner(PROMPT)
    _, uncond = pipe.conditioner.precomputed([PROMPT])(PROMPT)
    trained_null = _trained_null(pipe, cond)
    assert uncond.keys() == trained_null.keys()
    assert all(torch.equal(uncond[k], trained_null[k]) for k in uncond)


def _cfg_parallel_latent(rank: int, world: int) -> torch.Tensor:
    import torch.distributed as dist

    pipe = _pipeline(_model("wan"), "wan", ParallelLayout(cfg_group=dist.group.WORLD))
    spec = GenerationSpec(steps=2, guidance=4.0, seed=3)
    return pipe.sample_latent(pipe.prepare(spec, [PROMPT]), PROMPT)


def test_cfg_parallel_guides_a_model_attending_to_padding_against_the_null_condition_dropout_fed():
    pipe = _pipeline(_model("wan"), "wan")
    cond, _ = pipe.conditioner(PROMPT)
    trained_null = _trained_null(pipe, cond)
    _, expected = _sample(pipe, 4.0, lambda net, x, level: combine(net(x, level, cond), net(x, level, trained_null), 4.0))
    outs = run_on_ranks(_cfg_parallel_latent, 2)
    assert torch.equal(outs[0], outs[1])
    torch.testing.assert_close(outs[0], expected, rtol=1e-5, atol=1e-5)
