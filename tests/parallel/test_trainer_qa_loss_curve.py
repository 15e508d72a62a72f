"""The loss curve: the smoothed curve goes on around a skipped non-finite step (a trailing mean over
the finite losses) instead of vanishing for a whole window; a rolled-back run's history is its own;
a missing matplotlib is said before the first step."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.parallel.trainer_helpers import one_thread, run_config, tiny_config  # noqa: F401 (autouse: one CPU thread per test)
from vfm_parallel.trainer.metrics import read_history, smoothed


def test_the_smoothed_loss_skips_a_nan_step_instead_of_blanking_the_window():
    losses = [4.0, 2.0, float("nan"), 2.0, 4.0, float("inf")]
    assert smoothed(losses, 3) == pytest.approx([4.0, 3.0, 3.0, 2.0, 3.0, 3.0])
    assert math.isnan(smoothed([float("nan")], 2)[0])  # nothing finite to average


def test_a_rolled_back_run_s_history_drops_the_abandoned_steps_after_its_resume_point(tmp_path):
    """Rollback (docs/parallel.md): resume from step 2 with the newer checkpoints moved out, stop at 3.
    metrics.jsonl keeps the abandoned run's steps 3-6; the loss curve (and TensorBoard, by its purge
    step) shows the resumed run from step 3 on, not steps 4-6 of the run it replaced."""
    cfg = tiny_config(tmp_path, checkpoint={"interval": 2, "keep": 5, "export": False})
    first = run_config(cfg)
    (tmp_path / "abandoned").mkdir()
    for name in ("step_00000004", "step_00000006"):
        shutil.move(tmp_path / "checkpoints" / name, tmp_path / "abandoned" / name)
    cfg["checkpoint"]["resume"] = str(tmp_path / "checkpoints" / "step_00000002")
    cfg["train"]["stop_at"] = 3
    cfg["optim"]["lr"] = cfg["optim"]["lr"] / 2  # another step 3: the rollback's
    rolled = run_config(cfg)
    steps, losses = read_history(tmp_path / "metrics.jsonl")
    assert steps == [1, 2, 3]
    assert losses == [first.losses[1], first.losses[2], rolled.losses[3]]


def test_a_run_without_matplotlib_that_wants_the_loss_curve_stops_before_its_first_step(tmp_path):
    """`pip install vfm-parallel` without the [train] extra: the loss curve, drawn after the last step,
    ended a finished run with "ModuleNotFoundError: No module named 'matplotlib'"."""
    root = Path(__file__).resolve().parents[2]
    script = f"""
import json, sys
sys.modules["matplotlib"] = None  # what `import matplotlib` meets where it is not installed
from tests.parallel.trainer_helpers import run_config, tiny_config
cfg = tiny_config({str(tmp_path)!r})
cfg["logging"]["loss_curve"] = True
try:
    run_config(cfg)
except ImportError as exc:
    print(json.dumps(str(exc)))
"""
    result = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == (
        "the loss curve (logging.loss_curve = true) needs matplotlib: `pip install 'vfm-parallel[train]'`, "
        "or set logging.loss_curve = false")
    assert not (tmp_path / "metrics.jsonl").exists()  # no step was taken
