"""A prompt longer than a Hugging Face text encoder's ``max_length`` (which it cuts there without a word)
is named with its full token count; a prompt that fits, even exactly, is not."""

from __future__ import annotations

import warnings

import pytest

from vfm_infer.checks import PromptTruncatedWarning
from vfm_infer.pipeline import GenerationSpec, VideoPipeline
from tests.infer.tiny import tiny_meta


def test_a_prompt_past_a_t5_encoders_max_length_warns_with_its_token_count(tmp_path):
    pytest.importorskip("transformers")
    import torch
    import vfm_models
    from vfm_models.conditioning import describe
    from tests.models.test_text_encoders import make_t5_folder

    make_t5_folder(tmp_path / "t5", "t5")
    torch.manual_seed(0)
    model = vfm_models.get_family("dit-cross").create(in_channels=12, patch=(1, 2, 2), hidden=32, depth=1, num_heads=2,
                                                       text_dim=16)
    meta = tiny_meta(family="dit-cross", text_encoder="t5", null_condition=describe(model.config),
                     text_encoder_options={"path": str(tmp_path / "t5"), "max_length": 8})
    pipe = VideoPipeline(model, meta)
    prompts = ["a b c d e f g", "a b c d e f g h i j k l"]  # 7 words + </s> = 8 tokens fit; 13 do not
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prepared = pipe.prepare(GenerationSpec(steps=1, guidance=2.0), prompts)
    notes = [str(w.message) for w in caught if issubclass(w.category, PromptTruncatedWarning)]
    assert notes == list(prepared.warnings) == [
        "prompt 1 (video 0001) ('a b c d e f g h i j k l') is 13 tokens, more than the 8 tokens the text encoder "
        "reads (its max_length); the model does not see the words past them"]
