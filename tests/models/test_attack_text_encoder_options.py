"""Attack: an export (or shards) recording ``text_encoder_options`` for the ``t5`` encoder with
``max_length: 1000000000`` and ``pad_to_max_length: true``. The encoder was built without a word, and
``vfm generate`` then padded the empty caption (the null condition, encoded while the pipeline is
built) to a billion tokens: all the memory. Now the encoder refuses such a length, naming the option
and the accepted range (a real tiny T5 folder; nothing is encoded)."""

from __future__ import annotations

import pytest

import vfm_models

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def t5(tmp_path_factory):
    from tests.models.test_text_encoders import make_t5_folder

    folder = tmp_path_factory.mktemp("t5") / "t5"
    make_t5_folder(folder, "t5")
    return folder


@pytest.mark.parametrize("max_length", [10**9, 0, -1, "512", True])
def test_a_max_length_out_of_range_or_not_an_integer_is_refused(t5, max_length):
    with pytest.raises(ValueError, match=rf"T5TextEncoder: max_length must be an integer in \[1, 65536\] tokens, got {max_length!r}"):
        vfm_models.get_text_encoder("t5")(path=str(t5), max_length=max_length, pad_to_max_length=True)


def test_a_usual_length_still_pads_to_it(t5):
    encoder = vfm_models.get_text_encoder("t5")(path=str(t5), max_length=16, pad_to_max_length=True)
    embeddings, mask = encoder.encode(["a cat"])
    assert embeddings.shape == (1, 16, 16) and int(mask.sum()) == 3  # "a cat </s>"
