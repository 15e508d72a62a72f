"""``save_export`` refuses weights whose names or shapes do not fit the family's config before writing any
file (the model is built on the meta device): a model with a block compiled on its own
(``blocks.0._orig_mod.``, which :func:`~vfm_models.export.unwrapped` cannot strip) was written and refused
only by ``load_export``, every weight of that block missing and unexpected."""

from __future__ import annotations

import pytest
import torch

from tests.infer.tiny import tiny_dit, tiny_meta
from vfm_models.checkpoint import CheckpointMismatchError
from vfm_models.export import load_export, save_export


def test_weights_under_a_nested_compile_prefix_are_refused_when_written(tmp_path):
    model = tiny_dit()
    model.blocks[0] = torch.compile(model.blocks[0])
    with pytest.raises(CheckpointMismatchError, match=r"(?s)do not fit family 'dit' .*nothing is written to .*not in the model.*blocks\.0\._orig_mod\."):
        save_export(tmp_path / "export", model, tiny_meta(config=model.config))
    assert not (tmp_path / "export").exists()


def test_weights_of_another_shape_than_the_config_are_refused_when_written(tmp_path):
    model = tiny_dit()
    state = {**model.state_dict(), "final_layer.linear.bias": torch.zeros(1)}
    with pytest.raises(CheckpointMismatchError, match=r"final_layer\.linear\.bias"):
        save_export(tmp_path / "export", state, tiny_meta(config=model.config))
    assert not (tmp_path / "export").exists()


def test_weights_that_fit_are_written_and_load(tmp_path):
    model = tiny_dit()
    folder = save_export(tmp_path / "export", model.state_dict(), tiny_meta(config=model.config))
    loaded, _ = load_export(folder)
    assert loaded.state_dict().keys() == model.state_dict().keys()
