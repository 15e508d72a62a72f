"""What a model does with ``cond`` keys it does not read: a key no conditioning reads (a typo such as
``txt`` or ``labels``) is an error naming the keys the model takes; a key another kind of model reads
(``y`` given to an unconditional model, as the synthetic loader's labels are) is ignored with one warning
per model. Every family takes its own keys without a word, and a plugin family declares more."""

from __future__ import annotations

import warnings

import pytest
import torch

import vfm_models
from vfm_models.families.base import IgnoredConditionWarning

X, T = torch.randn(2, 4, 2, 4, 4), torch.full((2,), 0.5)
TEXT = {"text": torch.randn(2, 3, 8), "text_mask": torch.ones(2, 3, dtype=torch.bool)}
SMALL = dict(in_channels=4, patch=(1, 2, 2), hidden=32, depth=2, num_heads=2)


def make(family: str, **options):
    torch.manual_seed(0)
    return vfm_models.get_family(family).create(**{**SMALL, **options})


@pytest.mark.parametrize("family, options, cond", [
    ("dit", {"num_classes": 4}, {"y": torch.tensor([1, 4])}),
    ("dit", {"num_classes": 0}, None),
    ("dit-cross", {"text_dim": 8}, TEXT),
    ("moviegen", {"text_dim": 8, "num_kv_heads": 1}, TEXT),
    ("stdit", {"text_dim": 8}, TEXT),
    ("wan", {"text_dim": 8, "num_heads": 2}, TEXT),  # Wan without its mask drops text_mask itself
])
def test_every_family_takes_its_own_cond_keys_without_a_warning(family, options, cond):
    model = make(family, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("error", IgnoredConditionWarning)
        assert model(X, T, cond).shape[0] == 2


@pytest.mark.parametrize("family, options, cond, accepted", [
    ("dit", {"num_classes": 4}, {"y": torch.tensor([1, 2]), "labels": torch.tensor([1, 2])}, "'y'"),
    ("dit-cross", {"text_dim": 8}, {**TEXT, "txt": torch.randn(2, 3, 8)}, "'text', 'text_mask'"),
    ("dit", {"num_classes": 0}, {"class_labels": torch.tensor([1, 2])}, "none"),
])
def test_a_cond_key_no_conditioning_reads_is_an_error_naming_the_accepted_keys(family, options, cond, accepted):
    model = make(family, **options)
    extra = sorted(set(cond) - {"y", "text", "text_mask"})[0]
    with pytest.raises(ValueError) as info:
        model(X, T, cond)
    assert str(info.value).startswith(f"cond has key {extra!r}, which this model does not read; it takes cond = ")
    assert str(info.value).endswith(f"(accepted keys: {accepted}; a family that reads more keys names them in its "
                                    "cond_keys())")


def test_a_key_another_kind_of_model_reads_is_ignored_with_one_warning_per_model():
    model = make("dit", num_classes=0)  # unconditional: the synthetic loader still hands it labels
    labels = {"y": torch.tensor([1, 2])}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = model(X, T, labels)
        again = model(X, T, labels)
    notes = [str(w.message) for w in caught if issubclass(w.category, IgnoredConditionWarning)]
    assert notes == ["cond key 'y' ignored: this model takes cond = None (unconditional) (warned once per model)"]
    torch.testing.assert_close(first, model(X, T, None))  # ignored: the output is the unconditional one
    torch.testing.assert_close(again, first)
    with pytest.warns(IgnoredConditionWarning, match="cond keys 'text', 'text_mask' ignored: this model takes cond = \\{'y'"):
        make("dit", num_classes=4)(X, T, {"y": torch.tensor([0, 1]), **TEXT})


def test_a_plugin_family_declares_the_cond_keys_it_reads():
    model = make("dit", num_classes=4)

    class WithFps(type(model)):  # a plugin's family reading one more key
        def cond_keys(self):
            return super().cond_keys() | {"fps"}

    model.__class__ = WithFps
    with warnings.catch_warnings():
        warnings.simplefilter("error", IgnoredConditionWarning)
        model(X, T, {"y": torch.tensor([1, 2]), "fps": torch.tensor([24.0, 24.0])})


def test_an_out_of_range_label_on_the_cpu_is_still_a_value_error_naming_the_range():
    model = make("dit", num_classes=4)
    with pytest.raises(ValueError, match="class label 5 is out of range: this model takes labels 0..3 and 4 for the "
                                         "null class \\(num_classes = 4\\)"):
        model(X, T, {"y": torch.tensor([1, 5])})
