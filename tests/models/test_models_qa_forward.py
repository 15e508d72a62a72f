"""A batch whose noise levels do not match its samples is one error naming both counts, in every family."""

from __future__ import annotations

import pytest
import torch

from .test_families_support import FAMILIES, cond_for, tiny


@pytest.mark.parametrize("family", FAMILIES)
def test_noise_levels_of_another_batch_size_are_refused_naming_both(family):
    """t of 3 with x of 2 (and cond of 3) was a RuntimeError inside the first block ("size of tensor a (2)
    must match the size of tensor b (3)"); one level for all, t of shape (1,), still broadcasts."""
    model = tiny(family).eval()
    x = torch.randn(2, model.config.in_channels, 1, 4, 4)
    with pytest.raises(ValueError, match=r"t has 3 noise levels but x has 2 samples; t must be \(B,\) = \(2,\), or \(1,\)"):
        model(x, torch.rand(3), cond_for(model, 3, text_len=3))
    with torch.no_grad():
        shared = model(x, torch.full((1,), 0.3), cond_for(model, 1, text_len=3))
        each = model(x, torch.full((2,), 0.3), {k: v.expand(2, *v.shape[1:]) for k, v in cond_for(model, 1, 3).items()})
    assert torch.allclose(shared, each, atol=1e-6)


@pytest.mark.parametrize("family", FAMILIES)
def test_noise_levels_that_are_not_a_1d_tensor_are_refused_naming_the_accepted_shapes(family):
    """A 0-d t (torch.tensor(0.5)) was "IndexError: tuple index out of range", a float an AttributeError."""
    model = tiny(family).eval()
    x = torch.randn(2, model.config.in_channels, 1, 4, 4)
    cond = cond_for(model, 2, text_len=3)
    for t, got in ((torch.tensor(0.5), r"shape \(\)"), (0.5, "a float"), (torch.rand(2, 1), r"shape \(2, 1\)")):
        with pytest.raises(ValueError, match=rf"t must be a 1-D tensor of noise levels, \(B,\) .*\(1,\) .*; got {got}"):
            model(x, t, cond)
    with pytest.raises(ValueError, match=r"t must be a 1-D tensor"):
        model.forward_packed([x[0], x[1]], torch.tensor(0.5), cond)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_cond_that_is_not_a_dict_of_tensors_is_refused_naming_what_the_model_takes(family):
    """A tensor as cond was "Boolean value of Tensor with more than one value is ambiguous"."""
    model = tiny(family).eval()
    x, t = torch.randn(2, model.config.in_channels, 1, 4, 4), torch.rand(2)
    cond = cond_for(model, 2, text_len=3)
    wanted = "'y': " if model.config.num_classes else "'text': "
    with pytest.raises(TypeError, match=rf"cond must be a dict, \{{{wanted}.*; got a Tensor"):
        model(x, t, next(iter(cond.values())))
    key = next(iter(cond))
    with pytest.raises(TypeError, match=rf"cond\['{key}'\] must be a tensor; got a list"):
        model(x, t, {**cond, key: cond[key].tolist()})


def test_a_class_label_out_of_range_is_refused_naming_the_labels_the_model_takes():
    """Label 10 is the null class of a 10-class model; 11 or -1 was "IndexError: index out of range in self"."""
    model = tiny("dit").eval()
    x, t = torch.randn(2, model.config.in_channels, 1, 4, 4), torch.rand(2)
    assert model.config.num_classes == 10
    for bad in (11, -1):
        with pytest.raises(ValueError, match=rf"class label {bad} is out of range: this model takes labels 0..9 and 10 "
                                             r"for the null class \(num_classes = 10\)"):
            model(x, t, {"y": torch.tensor([3, bad])})
    with torch.no_grad():
        assert model(x, t, {"y": torch.tensor([0, 10])}).shape == x.shape


@pytest.mark.parametrize("family", FAMILIES)
def test_a_bfloat16_model_takes_the_float32_text_the_text_encoders_give(family):
    """Text encoders return float32 embeddings; a bf16 text model failed on them in its cross-attention
    ("mat1 and mat2 must have the same dtype") while it took float32 noise levels. Packed too."""
    model = tiny(family).eval()
    cond = cond_for(model, 2, text_len=3)
    x = torch.randn(2, model.config.in_channels, 1, 4, 4)
    with torch.no_grad():
        expected = model.to(torch.bfloat16)(x.bfloat16(), torch.full((2,), 0.3),
                                            {k: v.bfloat16() if v.is_floating_point() else v for k, v in cond.items()})
        out = model(x.bfloat16(), torch.full((2,), 0.3), cond)
        packed = model.forward_packed([x[0].bfloat16(), x[1].bfloat16()], torch.full((2,), 0.3), cond)
    assert out.dtype == torch.bfloat16 and torch.equal(out, expected)
    assert torch.equal(torch.stack(packed), out)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_bfloat16_model_takes_the_float32_latents_a_sampler_keeps(family):
    """The samplers keep latents in float32; a bf16 model failed on them in its patch embedding ("mat1 and
    mat2 must have the same dtype") unless run under autocast."""
    model = tiny(family).eval().to(torch.bfloat16)
    cond = cond_for(model, 2, text_len=3)
    x = torch.randn(2, model.config.in_channels, 1, 4, 4)
    with torch.no_grad():
        out = model(x, torch.full((2,), 0.3), cond)
        packed = model.forward_packed([x[0], x[1]], torch.full((2,), 0.3), cond)
    assert out.dtype == torch.bfloat16 and torch.equal(out, model(x.bfloat16(), torch.full((2,), 0.3), cond))
    assert torch.equal(torch.stack(packed), out)
