"""A text longer than a text encoder's ``max_length`` is cut there; the encoder says so once (per encoder,
so a run's many batches give one warning, not one per text), naming how many tokens the longest cut text
kept and dropped. A text that fits, even exactly, gives none."""

from __future__ import annotations

import warnings

import pytest

import vfm_models
from vfm_models.text_encoders.truncation import TextTruncatedWarning


def _notes(encode, *batches) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for batch in batches:
            encode(batch)
    return [str(w.message) for w in caught if issubclass(w.category, TextTruncatedWarning)]


def test_a_5000_character_prompt_cut_by_the_hash_encoder_warns_once_with_tokens_kept_and_dropped():
    encoder = vfm_models.get_text_encoder("hash")()  # max_length 32, the end token included
    long = "word " * 1000  # 5000 characters: 1000 words and the end token
    notes = _notes(encoder.encode, [long, "a cat"], [long] * 4, ["word " * 2000])
    assert notes == ["HashTextEncoder: 1 text of 2 was longer than its max_length of 32 tokens and cut there: the "
                     "longest, 1001 tokens, kept 32 and dropped 969; later texts are cut the same way without another "
                     "warning (a larger max_length in the text encoder's options keeps more)"]


def test_a_text_that_fits_the_hash_encoder_exactly_gives_no_warning():
    encoder = vfm_models.get_text_encoder("hash")(max_length=8)
    assert _notes(encoder.encode, ["a b c d e f g", "a b"]) == []  # 7 words + </s> = 8 tokens
    assert encoder.count_tokens("a b c d e f g h") == 9
    assert _notes(encoder.encode, ["a b c d e f g h"])[0].startswith("HashTextEncoder: 1 text of 1 was longer than "
                                                                      "its max_length of 8 tokens")


def test_a_t5_encoder_cutting_a_prompt_warns_once_with_its_full_token_count(tmp_path):
    pytest.importorskip("transformers")
    from tests.models.test_text_encoders import make_t5_folder

    make_t5_folder(tmp_path / "t5", "t5")
    encoder = vfm_models.get_text_encoder("t5")(tmp_path / "t5", max_length=8)
    assert _notes(encoder.encode, ["a b c d e f g"]) == []  # 7 words + </s>: fits exactly
    notes = _notes(encoder.encode, ["a b c d e f g h i j k l", "a b"], ["a b c d e f g h i j k l m n"])
    assert len(notes) == 1
    assert "1 text of 2 was longer than its max_length of 8 tokens and cut there: the longest, 13 tokens, kept 8 " \
           "and dropped 5" in notes[0]
