"""Curator writers that name a file directly (not through atomic_write) replace a symbolic link
planted at that name (an output folder from elsewhere holding ``balancer.jsonl -> ~/.bashrc``)."""

from __future__ import annotations

import torch

from vfm_curator.io.paths import append_line
from vfm_curator.shot_detectors.transnetv2 import load_weights, save_weights
from vfm_curator.shot_detectors.transnetv2_model import TransNetV2


def _victim(tmp_path):
    outside = tmp_path / "home"
    outside.mkdir()
    victim = outside / "bashrc"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    return out, victim


def test_an_appended_log_replaces_a_link_at_its_name_then_appends_to_its_own_file(tmp_path):
    out, victim = _victim(tmp_path)
    (out / "balancer.jsonl").symlink_to(victim)
    append_line(out / "balancer.jsonl", '{"step": 1}')
    append_line(out / "balancer.jsonl", '{"step": 2}')
    assert victim.read_text() == "precious" and not (out / "balancer.jsonl").is_symlink()
    assert (out / "balancer.jsonl").read_text() == '{"step": 1}\n{"step": 2}\n'


def test_transnetv2_weights_replace_a_link_at_their_name_and_leave_its_target_alone(tmp_path):
    out, victim = _victim(tmp_path)
    path = out / "transnetv2.safetensors"
    path.symlink_to(victim)
    model = TransNetV2()
    save_weights(model, path)
    assert victim.read_text() == "precious" and not path.is_symlink()
    other = TransNetV2()
    load_weights(other, path)
    assert all(torch.equal(other.state_dict()[k], v) for k, v in model.state_dict().items())
