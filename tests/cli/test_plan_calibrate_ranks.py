"""``torchrun --nproc-per-node K -m vfm_cli.main plan --calibrate`` on a CPU: the K ranks share the
host's memory, so the profile gives each rank its share (it gave each the whole host's, and the
planner let K ranks together plan for K times the memory there is)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib

from pathlib import Path

from vfm_parallel.planner.calibrate import device_memory_gib

ROOT = Path(__file__).resolve().parents[2]


def test_ranks_calibrated_on_one_cpu_host_each_get_their_share_of_its_memory(tmp_path):
    out = tmp_path / "cpu2.toml"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "vfm_cli.main",
           "plan", "--calibrate", "--gpu", "cpu", "--profile-out", str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    profile = tomllib.loads(out.read_text())
    assert profile["gpus_per_node"] == 2 and profile["device"] == "cpu"
    assert "gpus_per_node = 2: the ranks calibrated together on this host" in profile["description"]
    assert abs(profile["memory_gib"] - device_memory_gib("cpu") / 2) < 0.05, profile["memory_gib"]


def test_calibrating_and_planning_under_torchrun_plans_once_with_the_profile_rank_0_wrote(tmp_path):
    # every rank planned (the table twice; with --measure each rank would start its own torchrun runs),
    # and a rank that passed rank 0 read the profile before rank 0 had written it
    out = tmp_path / "cpu2.toml"
    block = tmp_path / "parallel.toml"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "vfm_cli.main",
           "plan", "configs/tiny.toml", "--gpus", "2", "--calibrate", "--gpu", "cpu", "--profile-out", str(out),
           "--write-block", str(block), "--top", "2"]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("train the best:") == 1, run.stdout
    assert run.stdout.count("wrote the [parallel] block") + run.stderr.count("wrote the [parallel] block") == 1
    assert "2 x cpu-calibrated" in run.stdout and tomllib.loads(block.read_text())["parallel"]


def test_calibrating_a_gpu_profile_on_a_machine_without_a_gpu_is_refused_naming_the_cpu_profile(tmp_path):
    # `vfm plan --calibrate` (--gpu h100 by default) on a CPU wrote "h100-calibrated": the CPU's matmul
    # rate as the peak, beside the H100's memory bandwidth and NVLink figures
    import pytest
    import torch
    from typer.testing import CliRunner

    from vfm_cli.main import app

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: --calibrate measures it")
    out = tmp_path / "profile.toml"
    result = CliRunner().invoke(app, ["plan", "--calibrate", "--profile-out", str(out)])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.replace("│", " ").split())
    assert "this machine has no CUDA GPU, so --calibrate measures its CPU" in text and "--gpu cpu" in text, text
    assert not out.exists()
