"""``torchrun --nproc-per-node K -m vfm_cli.main plan --calibrate`` on a CPU: the K ranks share the
host's memory, so the profile gives each rank its share (it gave each the whole host's, and the
planner let K ranks together plan for K times the memory there is)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib

from vfm_parallel.planner.calibrate import device_memory_gib


def test_ranks_calibrated_on_one_cpu_host_each_get_their_share_of_its_memory(tmp_path):
    out = tmp_path / "cpu2.toml"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "vfm_cli.main",
           "plan", "--calibrate", "--gpu", "cpu", "--profile-out", str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    profile = tomllib.loads(out.read_text())
    assert profile["gpus_per_node"] == 2
    assert abs(profile["memory_gib"] - device_memory_gib("cpu") / 2) < 0.05, profile["memory_gib"]
