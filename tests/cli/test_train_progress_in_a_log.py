"""``vfm train`` with its output going to a file (a batch job's log, ``| tee``), not a terminal: rich
drew its bar there only when the run ended, one line cut at 80 columns, so the command prints a whole
plain line per logged step as the run goes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from vfm_cli.main import app

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SMALL = ["optim.warmup_steps=1", "checkpoint.export=false", "logging.tensorboard=false", "logging.loss_curve=false",
         "logging.peak_tflops=1.0", "data.num_samples=16", "model.options.hidden=16", "model.options.num_heads=2",
         "model.options.depth=1", "logging.progress=true"]
CLOCK = r"\d+:\d\d:\d\d"


def _args(out: Path, *items: str) -> list[str]:
    return ["train", str(CONFIGS / "tiny.toml"),
            *[arg for item in (*SMALL, f"train.out_dir={out}", *items) for arg in ("--set", item)]]


def _line(step: int, total: int) -> str:
    """A whole progress line: elapsed, step/total with its share, the figures the bar shows, ETA."""
    number = r"-?[\d.]+(?:e[-+]\d+)?"
    return (rf"^{CLOCK} step {step}/{total} \({100 * step // total}%\)  loss {number}  grad_norm {number}  "
            rf"lr {number}  tokens_per_s {number}  MFU\(6N\+12LhS\) {number}%(?:  MFU\(executed\) {number}%)?  "
            rf"ETA {CLOCK}$")


def test_train_into_a_log_prints_a_whole_line_per_logged_step(tmp_path):
    result = CliRunner().invoke(app, _args(tmp_path / "run", "train.steps=12", "logging.interval=4"))
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if re.match(rf"{CLOCK} step ", line)]
    assert len(lines) == 3, result.output  # steps 4, 8 and 12: one each, not one drawn at the end
    for line, step in zip(lines, (4, 8, 12)):
        assert re.match(_line(step, 12), line), line
    assert "…" not in result.output and "━" not in result.output, result.output  # nothing cut, no bar drawn


def test_train_into_a_log_file_shows_progress_while_it_runs(tmp_path):
    """A real process with stdout in a file (Python buffers it there): the first logged step's line is
    in the file while the run goes on, not only when it ends."""
    log = tmp_path / "log"
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONUNBUFFERED", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "vfm_cli.main",
                                 *_args(tmp_path / "run", "train.steps=100000", "logging.interval=2",
                                        "checkpoint.interval=0")],
                                stdout=out, stderr=subprocess.STDOUT, env={**env, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.monotonic() + 240
        while not re.search(_line(2, 100000), log.read_text(), re.M):
            assert proc.poll() is None, f"exited {proc.returncode} before a progress line:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"no progress line in 240 s:\n{log.read_text()}"
            time.sleep(0.2)
        assert proc.poll() is None  # the line came while the run goes on
    finally:
        proc.send_signal(signal.SIGTERM)  # stops after the current step with a checkpoint
        proc.wait(timeout=120)
