"""``python -m vfm_cli`` is the ``vfm`` command (for a venv whose scripts folder is not on PATH)."""

from __future__ import annotations

import subprocess
import sys


def test_python_dash_m_vfm_cli_runs_the_vfm_command():
    done = subprocess.run([sys.executable, "-m", "vfm_cli", "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for command in ("curate", "shard", "train", "generate", "plugins"):
        assert command in done.stdout
