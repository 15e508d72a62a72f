"""A prompt whose condition is the unconditional branch itself (an empty prompt: a text model's null
condition is the embedding of the empty caption; or a prompt equal to the negative prompt) makes
guidance uncond + scale * (cond - uncond) = cond at every scale: the request says so in a warning
rather than spending twice the compute on a guidance that does nothing."""

from __future__ import annotations

import warnings

import pytest
import torch

import vfm_models
from vfm_infer.checks import UnusedInputWarning
from vfm_infer.pipeline import GenerationSpec, VideoPipeline
from vfm_models.conditioning import describe
from tests.infer.tiny import LATENT_SHAPE, tiny_dit, tiny_meta


def _text_pipe():
    torch.manual_seed(0)
    model = vfm_models.get_family("dit-cross").create(in_channels=LATENT_SHAPE[0], patch=(1, 2, 2), hidden=32, depth=1,
                                                       num_heads=2, text_dim=16).eval()
    with torch.no_grad():  # adaLN-Zero starts at zero: give the output weights so the video depends on the prompt
        for p in model.parameters():
            if p.abs().sum() == 0:
                p.normal_(0, 0.05)
    meta = tiny_meta(config=model.config, null_condition=describe(model.config), guidance=2.0,
                     text_encoder="hash", text_encoder_options={"dim": 16, "max_length": 6})
    return VideoPipeline(model, meta)


def _notes(pipe, prompts, **spec):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prepared = pipe.prepare(GenerationSpec(steps=2, sampler="edm-euler", **spec), prompts)
    assert [str(w.message) for w in caught if issubclass(w.category, UnusedInputWarning)] == \
        [n for n in prepared.warnings if "guidance contrasts with" in n]
    return [n for n in prepared.warnings if "guidance contrasts with" in n]


@pytest.mark.parametrize("prompt", ["", "   "])
def test_an_empty_prompt_under_guidance_is_named_as_making_guidance_a_no_op(prompt):
    pipe = _text_pipe()
    (note,) = _notes(pipe, [prompt], guidance=3.0)
    assert note.startswith(f"prompt 0 (video 0000) {prompt!r} encodes as the empty caption, the null condition that "
                           "guidance contrasts with, so --guidance 3 cannot change its video")
    (default,) = _notes(pipe, [prompt])  # the export's guidance 2
    assert "so the export's default guidance 2 cannot change its video" in default


def test_the_warning_is_true_the_empty_prompt_video_is_the_same_at_every_guidance():
    pipe = _text_pipe()
    videos = [pipe.generate("", GenerationSpec(steps=2, sampler="edm-euler", guidance=g, seed=1)) for g in (1.0, 3.0, 7.0)]
    torch.testing.assert_close(videos[1], videos[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(videos[2], videos[0], atol=1e-5, rtol=0)
    prompted = [pipe.generate("a fox", GenerationSpec(steps=2, sampler="edm-euler", guidance=g, seed=1)) for g in (1.0, 7.0)]
    assert (prompted[0] - prompted[1]).abs().max() > 1e-3  # where the warning stays quiet, guidance acts


def test_a_prompt_equal_to_the_negative_prompt_is_named_for_text_and_class_models():
    (text,) = _notes(_text_pipe(), ["a fox", "A Fox", "a cat"], negative_prompt="a fox", guidance=4.0)
    assert text.startswith("prompts 0, 1 (videos 0000, 0001) encode as the --negative-prompt 'a fox' that guidance "
                           "contrasts with, so --guidance 4 cannot change their videos")
    classes = VideoPipeline(tiny_dit(), tiny_meta(null_condition={"kind": "class", "label": 4}))
    (label,) = _notes(classes, ["1", "01", "2"], negative_prompt="1", guidance=4.0)
    assert label.startswith("prompts 0, 1 (videos 0000, 0001) are the --negative-prompt's class '1'")


@pytest.mark.parametrize(
    ("prompts", "spec"),
    [
        ([""], {"guidance": 1.0}),  # guidance off: nothing to waste
        ([""], {"guidance": 0.0}),  # the unconditional branch, asked for
        ([""], {"guidance": 3.0, "negative_prompt": "blurry"}),  # guides away from the negative prompt
        (["a fox", "a cat"], {"guidance": 3.0}),
    ],
)
def test_no_warning_where_guidance_contrasts_two_different_conditions_or_is_off(prompts, spec):
    assert _notes(_text_pipe(), prompts, **spec) == []
