"""A 2-rank ``torchrun --standalone ... -m vfm_cli.main ARGS`` job (or a script's), every process of which loads a probe (the
source of a ``sitecustomize`` module) that writes its notes into a folder (``VFM_TEST_PROBE_DIR``), one file
``<RANK or launcher>-<pid>.<what>`` each; and the ranks' notes, read back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_probed_torchrun(tmp_path: Path, probe: str, notes: Path, *args: str, env: dict[str, str] | None = None,
                        script: Path | None = None) -> subprocess.CompletedProcess:
    """The finished job (its output captured); ``env`` adds to the environment (the probe's folder goes
    first on its ``PYTHONPATH``); ``script``, when given, is what the ranks run with ``args`` in place
    of ``vfm_cli.main``."""
    folder = tmp_path / "probe"
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(probe)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "VFM_TEST_PROBE_DIR": str(notes), **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join([str(folder), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           *([str(script)] if script else ["-m", "vfm_cli.main"]), *args],
                          capture_output=True, text=True, env=env, timeout=240)


def rank_notes(notes: Path, what: str) -> dict[str, str]:
    """{file name: text} of the ranks' notes of one kind (the launcher's own left out)."""
    return {p.name: p.read_text() for p in notes.glob(f"*.{what}") if not p.name.startswith("launcher")}
