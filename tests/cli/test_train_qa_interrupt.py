"""``vfm train`` stopped from outside: SIGTERM (a scheduler's warning before a kill) stops it after the
current step with a checkpoint, one line and exit 143, and the same command resumes; a checkpoint
that cannot be written (a full disk) is one ``error:`` line, exit 1, no partial folder left."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from vfm_cli.main import app

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SMALL = ["optim.warmup_steps=1", "checkpoint.export=false", "logging.tensorboard=false", "logging.progress=false",
         "logging.loss_curve=false", "logging.peak_tflops=1.0", "logging.interval=1", "data.num_samples=16",
         "model.options.hidden=16", "model.options.num_heads=2", "model.options.depth=1"]


def _args(out: Path, *items: str) -> list[str]:
    return ["train", str(CONFIGS / "tiny.toml"),
            *[arg for item in (*SMALL, f"train.out_dir={out}", *items) for arg in ("--set", item)]]


def _env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def _signalled(args: list[str], *signals: tuple[str, str, int]) -> tuple[subprocess.Popen, str, str]:
    """Run ``vfm train args``; for each (stream, line prefix, signal), wait for that line on stdout or
    stderr, then send the signal; return the finished process and the rest of its output."""
    proc = subprocess.Popen([sys.executable, "-m", "vfm_cli.main", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        for stream, prefix, sig in signals:
            for line in getattr(proc, stream):
                if line.startswith(prefix):
                    break
            proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc, out, err


def test_sigterm_stops_vfm_train_after_the_step_with_a_checkpoint_and_exit_143_and_it_resumes(tmp_path):
    # once training has started (a few steps are logged)
    proc, out, err = _signalled(_args(tmp_path, "train.steps=100000", "checkpoint.interval=0"),
                                ("stdout", "step 3/", signal.SIGTERM))
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    stopped = [line for line in err.splitlines() if line.startswith("stopped by SIGTERM after step ")]
    assert len(stopped) == 1 and "run the same command to resume" in stopped[0], err
    step = int(stopped[0].split("after step ")[1].split()[0])
    checkpoint = tmp_path / "checkpoints" / f"step_{step:08d}"
    assert f"checkpoint saved: {checkpoint}" in stopped[0] and checkpoint.is_dir()
    assert not (tmp_path / "export").exists()
    # The same command goes on from there (stop_at only ends this test's run early).
    resumed = CliRunner().invoke(app, _args(tmp_path, "train.steps=100000", "checkpoint.interval=0",
                                            f"train.stop_at={step + 1}"))
    assert resumed.exit_code == 0, resumed.output
    assert f"resuming from step {step} ({checkpoint})" in resumed.output


def _limit_file_size() -> None:
    """As a full disk does to the checkpoint: every file this process writes stops at 8 KiB."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (8 << 10, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


def test_a_checkpoint_that_cannot_be_written_is_one_error_line_and_no_partial_folder(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "vfm_cli.main", *_args(tmp_path, "train.steps=2",
                                                                        "checkpoint.interval=1")],
                          capture_output=True, text=True, env=_env(), preexec_fn=_limit_file_size, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    assert f"saving checkpoint {tmp_path / 'checkpoints' / 'step_00000001'} failed" in errors[0]
    assert "File too large" in errors[0] and "no checkpoint was committed before" in errors[0]
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == []  # no .tmp-step_* left behind


def test_a_second_ctrl_c_stops_at_once_with_one_line_and_exit_130(tmp_path):
    # Steps of ~1 s (2048 tokens a sample): the second Ctrl-C, sent as soon as the first is announced,
    # lands while the step (or the stop's save) is still running.
    proc, out, err = _signalled(_args(tmp_path, "train.steps=100000", "checkpoint.interval=0",
                                      "data.latent_shape=[3,8,32,32]", "data.micro_batch=8"),
                                ("stdout", "step 1/", signal.SIGINT), ("stderr", "SIGINT received", signal.SIGINT))
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert ("interrupted: stopped at once, without a checkpoint of this step; the same command resumes from the newest "
            f"checkpoint under {tmp_path}/checkpoints") in err
    assert not (tmp_path / "checkpoints").exists() or not any(p.name.startswith("step_") for p in (tmp_path / "checkpoints").iterdir())
