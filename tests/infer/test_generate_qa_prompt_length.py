"""A prompt longer than a text encoder's ``max_length`` (which it cuts there) is named with its full token
count and the tokens it keeps and drops, all such prompts in one note; a prompt that fits, even exactly, is not."""

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
        "a prompt is longer than the 8 tokens the text encoder reads (its max_length), and the model does not see the "
        "words past them: prompt 1 (video 0001) ('a b c d e f g h i j k l') is 13 tokens: it keeps 8 and drops 5"]


def test_many_long_prompts_give_one_note_naming_the_first_three_and_encoding_adds_no_second_warning():
    import torch
    import vfm_models
    from vfm_models.conditioning import describe
    from vfm_models.text_encoders.truncation import TextTruncatedWarning

    torch.manual_seed(0)
    model = vfm_models.get_family("dit-cross").create(in_channels=12, patch=(1, 2, 2), hidden=32, depth=1, num_heads=2,
                                                       text_dim=16)
    meta = tiny_meta(family="dit-cross", text_encoder="hash", null_condition=describe(model.config),
                     text_encoder_options={"dim": 16, "max_length": 4})
    pipe = VideoPipeline(model, meta)
    prompts = [f"w{i} " * (5 + i) for i in range(5)] + ["fits"]  # five past 4 tokens, one within
    spec = GenerationSpec(steps=1, guidance=2.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prepared = pipe.prepare(spec, prompts)
        pipe.sample_latent(prepared, prompts[0])
    cut = [str(w.message) for w in caught if issubclass(w.category, (PromptTruncatedWarning, TextTruncatedWarning))]
    assert cut == [
        "5 prompts are longer than the 4 tokens the text encoder reads (its max_length), and the model does not see "
        "the words past them: prompt 0 (video 0000) ('w0 w0 w0 w0 w0 ') is 6 tokens: it keeps 4 and drops 2; "
        "prompt 1 (video 0001) ('w1 w1 w1 w1 w1 w1 ') is 7 tokens: it keeps 4 and drops 3; "
        "prompt 2 (video 0002) ('w2 w2 w2 w2 w2 w2 w2 ') is 8 tokens: it keeps 4 and drops 4; and 2 more"]
