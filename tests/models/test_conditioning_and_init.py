"""The null condition (one definition for condition dropout and guidance), the weight
initialisation and the accepted output widths (in_channels, or 2 x for DiT's learned sigma)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import vfm_models
from vfm_models.blocks.adaln import AdaLN
from vfm_models.conditioning import describe, null_condition, with_null
from vfm_models.text_encoders.hashing import HashTextEncoder


def _cross(**overrides):
    torch.manual_seed(0)
    options = dict(in_channels=4, hidden=32, depth=2, num_heads=2, text_dim=16)
    options.update(overrides)
    return vfm_models.get_family("dit-cross").create(**options)


def test_the_null_condition_is_the_null_class_for_class_models():
    cfg = vfm_models.get_family("dit").config("tiny", num_classes=10)
    assert describe(cfg) == {"kind": "class", "label": 10}
    null = null_condition(cfg)
    assert null["y"].tolist() == [10]
    y = with_null({"y": torch.tensor([1, 2, 3])}, null, torch.tensor([False, True, False]))["y"]
    assert y.tolist() == [1, 10, 3]


def test_the_null_condition_of_a_text_model_is_the_encoders_empty_caption():
    cfg = vfm_models.get_family("dit-cross").config("tiny")
    encoder = HashTextEncoder(dim=16)
    null = null_condition(cfg, encoder)
    text, mask = encoder.encode([""])
    assert describe(cfg) == {"kind": "text", "caption": ""}
    assert torch.equal(null["text"], text) and torch.equal(null["text_mask"], mask)
    # a batch of longer captions: dropped rows become the (padded) null, the others stay
    captions, caption_mask = encoder.encode(["a red circle moving right", "a blue square"])
    out = with_null({"text": captions, "text_mask": caption_mask}, null, torch.tensor([True, False]))
    length = text.shape[1]
    assert torch.equal(out["text"][0, :length], text[0]) and not out["text"][0, length:].any()
    assert out["text_mask"][0].tolist() == [True] * length + [False] * (captions.shape[1] - length)
    assert torch.equal(out["text"][1], captions[1]) and torch.equal(out["text_mask"][1], caption_mask[1])
    with pytest.raises(ValueError, match="empty caption"):
        null_condition(cfg)
    with pytest.raises(ValueError, match="text_dim"):
        null_condition(cfg, HashTextEncoder(dim=8))


def test_unconditional_models_have_no_null_condition():
    cfg = vfm_models.get_family("dit").config("tiny", num_classes=0)
    assert describe(cfg) == {"kind": "none"} and null_condition(cfg) is None


@pytest.mark.parametrize("family", ["dit", "dit-cross", "moviegen", "stdit"])
def test_initialisation_is_adaln_zero_with_dit_embedders_and_torch_default_linears(family):
    torch.manual_seed(0)
    model = vfm_models.get_family(family).create("tiny")
    zero = {id(model.final_layer.linear.weight), id(model.final_layer.linear.bias)}
    for module in model.modules():
        if isinstance(module, AdaLN):
            zero |= {id(p) for n, p in module.named_parameters() if not n.startswith("down.")}
    embedder = {id(model.t_embedder.mlp[0].weight), id(model.t_embedder.mlp[2].weight)}
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        w = module.weight.detach()
        b = None if module.bias is None else module.bias.detach()
        if id(module.weight) in zero:
            assert not w.any() and (b is None or not b.any()), f"{name} (adaLN-Zero / final layer) is not zero"
        elif id(module.weight) in embedder:
            assert 0.01 < float(w.std()) < 0.03, name
        elif module is model.x_embedder.proj:  # xavier-uniform: within +-sqrt(6 / (fan_in + fan_out))
            bound = math.sqrt(6 / (w.shape[0] + w.shape[1]))
            assert 0.8 * bound < float(w.abs().max()) <= bound, name
        else:  # PyTorch's default: weights and biases uniform within +-1/sqrt(fan_in)
            bound = 1 / math.sqrt(w.shape[1])
            assert 0.8 * bound < float(w.abs().max()) <= bound, name
            assert b is None or (b.any() and float(b.abs().max()) <= bound), name
    if hasattr(model, "y_embedder"):
        assert float(model.y_embedder.table.weight.detach().std()) == pytest.approx(0.02, abs=0.01)


def test_initialisation_is_the_same_for_the_same_seed():
    a, b = _cross(), _cross()
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_out_channels_other_than_in_or_learned_sigma_are_refused_with_what_is_accepted():
    family = vfm_models.get_family("dit")
    with pytest.raises(ValueError, match=r"out_channels must equal in_channels \(4\), be 2 x in_channels \(8.*got 6"):
        family.config("tiny", in_channels=4, out_channels=6)
    assert family.config("tiny", in_channels=4, out_channels=4).output_channels == 4
    learned = family.config("tiny", in_channels=4, out_channels=8)  # DiT's learned sigma (converted checkpoints)
    assert (learned.output_channels, learned.learned_sigma) == (8, True)
