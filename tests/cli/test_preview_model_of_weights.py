"""The model a ``vfm train`` preview generates with: built on the meta device and given the gathered
weights themselves (no initialisation to overwrite, no second copy), its non-persistent buffers as a
real build makes them."""

from __future__ import annotations

import torch
import vfm_models
from torch import nn

from vfm_cli.recipe.watching import model_of_weights


def _dit():
    family = vfm_models.get_family("dit")
    config = family.config(hidden=32, depth=2, num_heads=2, in_channels=4, num_classes=10)
    return family, config, {k: v.clone() for k, v in family.build(config).state_dict().items()}


def test_the_preview_model_holds_the_gathered_weights_themselves_not_a_copy():
    family, config, weights = _dit()
    model = model_of_weights(family, config, weights, {})
    state = model.state_dict()
    assert state.keys() == weights.keys()
    assert all(state[k].data_ptr() == weights[k].data_ptr() for k in weights)
    assert not any(t.is_meta for t in (*model.parameters(), *model.buffers()))


class _Tabled(nn.Module):
    """A model with a table its build computes (a non-persistent buffer, in no state dict)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.proj = nn.Linear(size, size)
        self.inner = nn.Module()
        self.inner.register_buffer("table", torch.arange(size, dtype=torch.float32) ** 2, persistent=False)


class _Family:
    """A family as vfm_models.get_family returns one, with the model above; ``meta_ok=False``: its build
    needs real tensors (it cannot run on the meta device)."""

    def __init__(self, meta_ok: bool = True) -> None:
        self.meta_ok, self.real_builds = meta_ok, 0

    def build(self, size: int) -> nn.Module:
        if torch.empty(0).is_meta:
            if not self.meta_ok:
                raise NotImplementedError("this build reads a tensor's values")
        else:
            self.real_builds += 1
        return _Tabled(size)


def test_a_non_persistent_buffer_has_a_real_builds_values_from_one_real_build_for_every_preview():
    family, tables = _Family(), {}
    weights = {k: torch.randn_like(v) for k, v in _Tabled(4).state_dict().items()}
    for _ in range(3):
        model = model_of_weights(family, 4, weights, tables)
        assert torch.equal(model.inner.table, torch.tensor([0.0, 1.0, 4.0, 9.0]))
        assert "table" not in model.state_dict() and "inner.table" not in model.state_dict()  # still non-persistent
        assert torch.equal(model.proj.weight, weights["proj.weight"])
    assert family.real_builds == 1


def test_a_family_that_cannot_be_built_on_the_meta_device_is_built_for_real_and_loaded():
    family = _Family(meta_ok=False)
    weights = {k: torch.randn_like(v) for k, v in _Tabled(4).state_dict().items()}
    model = model_of_weights(family, 4, weights, {})
    assert torch.equal(model.proj.weight, weights["proj.weight"])
    assert torch.equal(model.inner.table, torch.tensor([0.0, 1.0, 4.0, 9.0]))
