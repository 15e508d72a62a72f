"""``vfm plan --write-block`` and ``--calibrate --profile-out`` replace a symbolic link at the file they
write (a config folder from elsewhere holding ``parallel.toml -> ~/.bashrc``), never write through it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from typer.testing import CliRunner

from tests.planted_links import plant_link
from vfm_cli.main import app

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_write_block_replaces_a_link_at_its_file_and_leaves_the_target_alone(tmp_path):
    block = tmp_path / "received" / "parallel.toml"
    victim = plant_link(block, tmp_path / "home")
    result = CliRunner().invoke(app, ["plan", str(CONFIGS / "dit-7b.toml"), "--gpus", "64", "--top", "1", "--write-block", str(block)])
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "precious" and not block.is_symlink()
    assert tomllib.loads(block.read_text())["parallel"]["tp"] >= 1


def test_calibrate_replaces_a_link_at_the_profile_and_leaves_the_target_alone(tmp_path):
    out = tmp_path / "received" / "cpu.toml"
    victim = plant_link(out, tmp_path / "home")
    result = CliRunner().invoke(app, ["plan", "--calibrate", "--gpu", "cpu", "--profile-out", str(out)])
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "precious" and not out.is_symlink()
    assert tomllib.loads(out.read_text())["name"] == "cpu-calibrated"
