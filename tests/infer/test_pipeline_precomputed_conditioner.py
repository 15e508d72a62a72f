"""``VideoPipeline(conditioner=)`` with :meth:`Conditioner.precomputed`: the prompts' conditions made once and
kept on the CPU give the videos the text encoder gives, bit for bit, without loading the encoder again."""

from __future__ import annotations

import copy

import pytest
import torch
import vfm_models
from vfm_models.conditioning import describe

from vfm_infer.conditioning import PrecomputedConditioner
from vfm_infer.pipeline import GenerationSpec, VideoPipeline

from tests.infer.tiny import LATENT_SHAPE, tiny_dit, tiny_meta

PROMPTS = ["a red fox jumps over a sleeping dog", "", "fog"]


def _text_model():
    torch.manual_seed(0)
    model = vfm_models.get_family("dit-cross").create("tiny", in_channels=LATENT_SHAPE[0]).eval()
    with torch.no_grad():  # adaLN-Zero starts every block as the identity and the output at 0
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    return model


def _meta(model, **extra):
    return tiny_meta(family="dit-cross", formulation="rectified-flow", config=model.config,
                     null_condition=describe(model.config),
                     **{"text_encoder": "hash", "text_encoder_options": {"dim": model.config.text_dim}, **extra})


# the empty prompt is the null condition: the pipeline notes that guidance cannot change its video
@pytest.mark.filterwarnings("ignore::vfm_infer.checks.UnusedInputWarning")
@pytest.mark.parametrize("negative_prompt", ["", "blurry"], ids=["null-condition", "negative-prompt"])
def test_a_precomputed_conditioner_generates_the_videos_the_text_encoder_does_bit_for_bit(negative_prompt):
    model = _text_model()
    encoding = VideoPipeline(copy.deepcopy(model), _meta(model))
    held = encoding.conditioner.precomputed(PROMPTS, negative_prompt)
    assert held.text_encoder is None and all(t.device.type == "cpu" for c in held.conditions.values() for t in c[0].values())
    kept = VideoPipeline(model, _meta(model), conditioner=held)
    spec = GenerationSpec(steps=2, guidance=4.0, seed=3, negative_prompt=negative_prompt)
    for i, prompt in enumerate(PROMPTS):
        expected = encoding.generate(prompt, spec, index=i)
        assert torch.equal(kept.generate(prompt, spec, index=i), expected), prompt
    assert expected.abs().max() > 1e-2  # a model whose videos are all 0 would pass anything


def test_a_pipeline_given_a_conditioner_loads_no_text_encoder():
    model = _text_model()
    held = VideoPipeline(copy.deepcopy(model), _meta(model)).conditioner.precomputed(PROMPTS)
    # an encoder that cannot be built: loading it would raise
    meta = _meta(model, text_encoder="no-such-encoder")
    with pytest.raises(Exception, match="no-such-encoder"):
        VideoPipeline(copy.deepcopy(model), meta)
    pipe = VideoPipeline(model, meta, conditioner=held)
    assert pipe.conditioner is held and pipe.conditioner.text_encoder is None
    assert pipe.generate(PROMPTS[0], GenerationSpec(steps=1)).shape[1:] == (4, 16, 16)


def test_a_precomputed_conditioner_refuses_another_prompt_naming_the_ones_it_holds():
    model = _text_model()
    held = VideoPipeline(model, _meta(model)).conditioner.precomputed(["a cat", "a dog"])
    with pytest.raises(ValueError, match=r"prompt 'a bird' is not one of them; accepted: 'a cat', 'a dog'"):
        held("a bird")
    with pytest.raises(ValueError, match=r"prompt 'a cat' with negative prompt 'fog' is not one of them"):
        held.check("a cat", "fog")


def test_a_precomputed_class_conditioner_checks_its_prompts_as_the_model_does():
    pipe = VideoPipeline(tiny_dit(), tiny_meta(null_condition={"kind": "class", "label": 4}))
    with pytest.raises(ValueError, match=r"class index 9 is out of range; this model has classes 0..3"):
        pipe.conditioner.precomputed(["1", "9"])
    held = pipe.conditioner.precomputed(["1", "2"])
    assert isinstance(held, PrecomputedConditioner) and held("2")[0]["y"].tolist() == [2]
    assert held("2")[1]["y"].tolist() == [4]  # the null class


def test_a_conditioner_of_another_kind_is_refused_naming_the_models_kind():
    model = _text_model()
    held = VideoPipeline(copy.deepcopy(model), _meta(model)).conditioner.precomputed(PROMPTS)
    with pytest.raises(ValueError, match=r"makes 'text' conditions but this model is class-conditional; accepted: a "
                                         r"Conditioner of this model's config"):
        VideoPipeline(tiny_dit(), tiny_meta(null_condition={"kind": "class", "label": 4}), conditioner=held)
