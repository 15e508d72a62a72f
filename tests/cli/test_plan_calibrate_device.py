"""``vfm plan --calibrate`` reads which kind of device a profile describes from the profile (its
``device``), not from its name: a GPU's profile saved under another name is refused on a machine
without CUDA (the name-suffix rule let it through, and the CPU's matmul rate became the peak of a
profile with the GPU's memory and NVLink figures); a CPU-calibrated profile calibrates again
whatever it is called."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from vfm_cli.main import app
from vfm_parallel.planner.hardware import PROFILES_DIR

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: --calibrate measures it")


def _calibrate(profile: str | Path, out: Path):
    return CliRunner().invoke(app, ["plan", "--calibrate", "--gpu", str(profile), "--profile-out", str(out)])


def test_a_gpu_profile_saved_under_another_name_is_refused_on_a_machine_without_cuda(tmp_path):
    mine = tmp_path / "cluster.toml"
    mine.write_text((PROFILES_DIR / "h100.toml").read_text().replace('name = "h100"', 'name = "my-cluster"'))
    out = tmp_path / "out.toml"
    result = _calibrate(mine, out)
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.replace("│", " ").split())
    assert "and my-cluster (" in text and "is a GPU's profile (device = \"cuda\"" in text and "--gpu cpu" in text, text
    assert not out.exists()


def test_a_cpu_calibrated_profile_calibrates_again_whatever_its_name(tmp_path):
    first = tmp_path / "first.toml"
    assert _calibrate("cpu", first).exit_code == 0
    assert tomllib.loads(first.read_text())["device"] == "cpu"
    renamed = tmp_path / "renamed.toml"
    renamed.write_text(first.read_text().replace('name = "cpu-calibrated"', 'name = "h100"'))
    result = _calibrate(renamed, tmp_path / "again.toml")
    assert result.exit_code == 0, result.output
    assert tomllib.loads((tmp_path / "again.toml").read_text())["device"] == "cpu"


def test_a_cpu_profile_calibrated_before_profiles_said_their_device_calibrates_again(tmp_path):
    """A file an older vfm plan --calibrate wrote has no 'device'; its calibration.source says what it
    measured (older versions went by the name, cpu-calibrated), so it is a CPU's, not a GPU's."""
    first = tmp_path / "first.toml"
    assert _calibrate("cpu", first).exit_code == 0
    old = tmp_path / "old.toml"
    old.write_text("".join(line for line in first.read_text().splitlines(keepends=True)
                           if not line.startswith("device = ")))
    assert "device" not in tomllib.loads(old.read_text())
    result = _calibrate(old, tmp_path / "again.toml")
    assert result.exit_code == 0, result.output
    assert tomllib.loads((tmp_path / "again.toml").read_text())["device"] == "cpu"
