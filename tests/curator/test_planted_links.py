"""Curator writers that name a file directly (not through atomic_write) replace a symbolic link
planted at that name (an output folder from elsewhere holding ``balancer.jsonl -> ~/.bashrc``)."""

from __future__ import annotations

import torch

from tests.planted_links import plant_link
from vfm_curator.io.paths import append_line
from vfm_curator.shot_detectors.transnetv2 import load_weights, save_weights
from vfm_curator.shot_detectors.transnetv2_model import TransNetV2


def test_an_appended_log_replaces_a_link_at_its_name_then_appends_to_its_own_file(tmp_path):
    out = tmp_path / "out"
    victim = plant_link(out / "balancer.jsonl", tmp_path / "home")
    append_line(out / "balancer.jsonl", '{"step": 1}')
    append_line(out / "balancer.jsonl", '{"step": 2}')
    assert victim.read_text() == "precious" and not (out / "balancer.jsonl").is_symlink()
    assert (out / "balancer.jsonl").read_text() == '{"step": 1}\n{"step": 2}\n'


def test_transnetv2_weights_replace_a_link_at_their_name_and_leave_its_target_alone(tmp_path):
    path = tmp_path / "out" / "transnetv2.safetensors"
    victim = plant_link(path, tmp_path / "home")
    model = TransNetV2()
    save_weights(model, path)
    assert victim.read_text() == "precious" and not path.is_symlink()
    other = TransNetV2()
    load_weights(other, path)
    assert all(torch.equal(other.state_dict()[k], v) for k, v in model.state_dict().items())
