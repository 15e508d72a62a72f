"""The transformers text encoders on an empty batch and on dtype names (tiny random T5 folders)."""

from __future__ import annotations

import pytest
import torch

import vfm_models

from .test_text_encoders import make_t5_folder

pytest.importorskip("transformers")


def test_t5_encodes_an_empty_batch_like_the_hash_encoder(tmp_path):
    """encode([]) was an IndexError inside the tokenizer; a sampler with no prompts left gets (0, L, dim)."""
    make_t5_folder(tmp_path, "t5")
    encoder = vfm_models.get_text_encoder("t5")(path=tmp_path)
    emb, mask = encoder.encode([])
    hashed, hashed_mask = vfm_models.get_text_encoder("hash")(dim=encoder.dim).encode([])
    assert emb.shape == hashed.shape == (0, 1, encoder.dim) and emb.dtype == torch.float32
    assert mask.shape == hashed_mask.shape == (0, 1) and mask.dtype == torch.bool
    padded = vfm_models.get_text_encoder("t5")(path=tmp_path, max_length=6, pad_to_max_length=True)
    assert padded.encode([])[0].shape == (0, 6, encoder.dim)


@pytest.mark.parametrize("name, expected", [("bf16", torch.bfloat16), ("torch.float16", torch.float16)])
def test_t5_takes_dtype_names_and_refuses_others_listing_them(tmp_path, name, expected):
    """'bf16' was AttributeError (module 'torch' has no attribute 'bf16'); 'nn' passed a module as the dtype."""
    make_t5_folder(tmp_path, "t5")
    encoder = vfm_models.get_text_encoder("t5")(path=tmp_path, dtype=name)
    assert next(encoder.model.parameters()).dtype == expected
    for wrong in ("bfloat17", "nn", "int8"):
        with pytest.raises(ValueError, match=rf"T5TextEncoder: dtype must be a floating-point dtype, one of float32, "
                                             rf"float16, bfloat16, float64, fp32, .*got '{wrong}'"):
            vfm_models.get_text_encoder("t5")(path=tmp_path, dtype=wrong)


def test_a_text_encoder_folder_without_a_tokenizer_is_refused_pointing_at_the_pipelines_tokenizer(tmp_path):
    """A diffusers pipeline's text_encoder/ holds no tokenizer. Without tokenizer_path, transformers built a
    default T5Tokenizer with no vocabulary and every word became <unk>: "a cat" and "a dog" encoded alike."""
    import shutil

    make_t5_folder(tmp_path / "src", "t5")
    (tmp_path / "pipe" / "text_encoder").mkdir(parents=True)
    (tmp_path / "pipe" / "tokenizer").mkdir()
    for f in (tmp_path / "src").iterdir():
        shutil.copy(f, tmp_path / "pipe" / ("tokenizer" if "token" in f.name else "text_encoder") / f.name)
    t5 = vfm_models.get_text_encoder("t5")
    with pytest.raises(FileNotFoundError, match=r"no tokenizer in .*text_encoder: none of tokenizer.json, spiece.model"
                                                r".*pass tokenizer_path=.*pipe/tokenizer\)"):
        t5(path=tmp_path / "pipe" / "text_encoder")
    with pytest.raises(FileNotFoundError, match=r"no tokenizer in .*text_encoder"):  # tokenizer_path named wrongly
        t5(path=tmp_path / "pipe" / "text_encoder", tokenizer_path=tmp_path / "pipe" / "text_encoder")
    encoder = t5(path=tmp_path / "pipe" / "text_encoder", tokenizer_path=tmp_path / "pipe" / "tokenizer")
    cat, dog = encoder.encode(["a cat", "a dog"])[0]
    assert not torch.allclose(cat, dog)


def test_a_text_encoder_loads_without_drawing_transformers_progress_bar(tmp_path, capfd):
    """transformers 5 draws a "Loading weights" bar on stderr at every load: library noise in a user's logs
    (every minilm build, every pipeline). The caller's setting is restored afterwards."""
    from transformers.utils import logging as hf_logging

    make_t5_folder(tmp_path, "t5")
    capfd.readouterr()
    vfm_models.get_text_encoder("t5")(path=tmp_path)
    out, err = capfd.readouterr()
    assert "Loading weights" not in out + err and "it/s" not in out + err
    assert hf_logging.is_progress_bar_enabled()
