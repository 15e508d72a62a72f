"""``vfm plan --write-block`` and ``--calibrate --profile-out`` replace a symbolic link at the file they
write (a config folder from elsewhere holding ``parallel.toml -> ~/.bashrc``), never write through it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from typer.testing import CliRunner

from vfm_cli.main import app

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _planted(tmp_path: Path, name: str) -> tuple[Path, Path]:
    outside = tmp_path / "home"
    outside.mkdir()
    victim = outside / "bashrc"
    victim.write_text("precious")
    folder = tmp_path / "received"
    folder.mkdir()
    (folder / name).symlink_to(victim)
    return folder / name, victim


def test_write_block_replaces_a_link_at_its_file_and_leaves_the_target_alone(tmp_path):
    block, victim = _planted(tmp_path, "parallel.toml")
    result = CliRunner().invoke(app, ["plan", str(CONFIGS / "dit-7b.toml"), "--gpus", "64", "--top", "1", "--write-block", str(block)])
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "precious" and not block.is_symlink()
    assert tomllib.loads(block.read_text())["parallel"]["tp"] >= 1


def test_calibrate_replaces_a_link_at_the_profile_and_leaves_the_target_alone(tmp_path):
    out, victim = _planted(tmp_path, "cpu.toml")
    result = CliRunner().invoke(app, ["plan", "--calibrate", "--gpu", "cpu", "--profile-out", str(out)])
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "precious" and not out.is_symlink()
    assert tomllib.loads(out.read_text())["name"] == "cpu-calibrated"
