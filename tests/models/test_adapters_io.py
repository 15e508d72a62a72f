"""vfm_models.adapters.io: a diffusers model folder is written with new files renamed into place,
never through a link planted in the folder."""

from __future__ import annotations

import json

import torch
from safetensors.torch import load_file

from tests.planted_links import plant_link
from vfm_models.adapters.io import DIFFUSERS_WEIGHTS, save_diffusers_folder


def test_a_diffusers_folder_is_not_written_through_links_planted_at_its_names(tmp_path):
    out = tmp_path / "out"
    victim_config = plant_link(out / "config.json.tmp", tmp_path / "home")  # the temporary name it used to write
    victim_weights = plant_link(out / DIFFUSERS_WEIGHTS, tmp_path / "home")  # the weights were written to their final name
    state = {"proj.weight": torch.arange(6.0).reshape(2, 3)}
    save_diffusers_folder(out, state, {"in_channels": 3}, "DiTTransformer2DModel")
    assert victim_config.read_text() == "precious" and victim_weights.read_bytes() == b"precious"
    assert not (out / DIFFUSERS_WEIGHTS).is_symlink()
    assert torch.equal(load_file(out / DIFFUSERS_WEIGHTS)["proj.weight"], state["proj.weight"])
    assert json.loads((out / "config.json").read_text())["_class_name"] == "DiTTransformer2DModel"
