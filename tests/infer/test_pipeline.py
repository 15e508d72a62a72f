"""The generation pipeline on a tiny real DiT: checks before work, determinism, CFG-parallel."""

from __future__ import annotations

import pytest
import torch

from vfm_infer.distributed import setup_inference
from vfm_infer.pipeline import GenerationSpec, VideoPipeline
from tests.gloo import spawn as run_on_ranks
from tests.infer.tiny import tiny_dit, tiny_meta

SPEC = GenerationSpec(steps=3, guidance=3.0, seed=7)


def test_same_seed_gives_the_same_video_and_another_seed_another():
    pipe = VideoPipeline(tiny_dit(), tiny_meta())
    a, b = pipe.generate("1", SPEC), pipe.generate("1", SPEC)
    c = pipe.generate("1", GenerationSpec(steps=3, guidance=3.0, seed=8))
    assert a.shape == (3, 4, 16, 16)  # pixel tokenizer, patch 2: 12 latent channels -> RGB 16x16
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_frames_and_size_set_the_video_shape():
    pipe = VideoPipeline(tiny_dit(), tiny_meta("rectified-flow"))
    video = pipe.generate("0", GenerationSpec(steps=2, frames=3, size=(8, 12)))
    assert video.shape == (3, 3, 8, 12)


def test_a_shape_other_than_the_trained_one_warns_naming_both():
    import warnings

    from vfm_infer.pipeline import UntrainedShapeWarning

    pipe = VideoPipeline(tiny_dit(), tiny_meta("rectified-flow"))  # trained: latent (12, 4, 8, 8), 4 frames at 16x16
    with pytest.warns(UntrainedShapeWarning, match="trained on 4 frames at 16x16 \\(latent 12x4x8x8\\); 8 frames at "
                      "16x24 is a shape it never saw \\(its sincos positions along the larger frames, width go beyond"):
        prepared = pipe.prepare(GenerationSpec(steps=2, frames=8, size=(16, 24)), ["0"])
    # a library caller sets GenerationSpec's fields, a command-line user the options: both are named
    assert len(prepared.warnings) == 1 and "leave out GenerationSpec's frames and size (--frames and --size)" in prepared.warnings[0]
    smaller = pipe.prepare(GenerationSpec(steps=2, frames=2, size=(16, 16)), ["0"]).warnings
    assert smaller and "2 frames at 16x16 is a shape it never saw, so expect" in smaller[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the trained shape, by default or named, warns of nothing
        assert pipe.prepare(GenerationSpec(steps=2), ["0"]).warnings == ()
        assert pipe.prepare(GenerationSpec(steps=2, frames=4, size=(16, 16)), ["0"]).warnings == ()


def test_guidance_changes_the_video_and_scale_one_is_unguided():
    pipe = VideoPipeline(tiny_dit(), tiny_meta())
    guided = pipe.generate("2", SPEC)
    plain = pipe.generate("2", GenerationSpec(steps=3, guidance=1.0, seed=7))
    assert (guided - plain).abs().max() > 1e-3


@pytest.mark.parametrize(
    ("spec", "prompt", "message"),
    [
        (GenerationSpec(sampler="nope"), "1", "unknown sampler 'nope'; available: .*edm-heun"),
        (GenerationSpec(sampler="flow-euler"), "1", "samples 'rectified-flow' but this model was trained with 'edm'; use one of: dpm-solver\\+\\+, edm-euler, edm-heun"),
        (GenerationSpec(size=(15, 16)), "1", "size 15x16 is not accepted: this model takes height and width multiples of 4"),
        (GenerationSpec(size=(18, 16)), "1", "size 18x16 is not accepted: this model takes height and width multiples of 4"),
        (GenerationSpec(), "cat", "class-conditional: the prompt must be a class index in \\[0, 4\\)"),
        (GenerationSpec(), "9", "class index 9 is out of range"),
    ],
)
def test_bad_requests_fail_before_any_denoising(spec, prompt, message):
    calls = []
    model = tiny_dit()
    model.register_forward_hook(lambda *a: calls.append(1))
    pipe = VideoPipeline(model, tiny_meta())
    with pytest.raises((ValueError, KeyError), match=message):
        pipe.prepare(spec, [prompt])
    assert calls == []


def _parallel_video(rank: int, world: int, cfg_parallel: bool, strategy: str) -> torch.Tensor:
    pipe = VideoPipeline(tiny_dit(), tiny_meta())
    prepared = pipe.prepare(SPEC, ["3"])
    assert setup_inference(pipe, prepared, cfg_parallel=cfg_parallel, cp_strategy=strategy) == rank
    return pipe.decode(pipe.sample_latent(prepared, "3"), SPEC)


@pytest.mark.parametrize(("world", "cfg_parallel", "strategy"), [(2, True, "cp-ring"), (2, False, "cp-ring"), (4, True, "cp-ring")])
def test_cfg_and_context_parallel_video_equals_the_single_process_video(world, cfg_parallel, strategy):
    expected = VideoPipeline(tiny_dit(), tiny_meta()).generate("3", SPEC)
    outs = run_on_ranks(_parallel_video, world, cfg_parallel, strategy)
    # fp32: the guided batch of 2 vs two batches of 1, and a sharded softmax, round differently;
    # EDM starts at sigma 80, so ~1e-6 relative rounding ends as up to ~1e-4 in [-1, 1] pixels.
    for out in outs:
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=2e-4)


def test_context_parallel_refuses_a_token_count_it_cannot_split():
    from vfm_infer.context_parallel import check_tokens

    with pytest.raises(ValueError, match="divisible by 3; latent \\(12, 4, 8, 8\\) with patch \\(1, 2, 2\\) gives 64 tokens"):
        check_tokens(tiny_dit(), (12, 4, 8, 8), 3)


def test_a_model_on_the_meta_device_is_refused_naming_it_and_how_to_load_weights():
    import vfm_models

    with torch.device("meta"):  # as a user sizes a model before loading weights
        model = vfm_models.get_family("dit").create(in_channels=12, hidden=32, depth=2, num_heads=2, num_classes=4)
    with pytest.raises(ValueError, match="on the meta device .*load its weights first"):
        VideoPipeline(model, tiny_meta())
