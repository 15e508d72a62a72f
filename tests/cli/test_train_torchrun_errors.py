"""`vfm train` under torchrun fails the way one process does: a layout the model refuses is one
`error:` line (not one per rank), and a rank killed mid-run ends the others at once with one line
saying a peer is gone (not gloo's traceback)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.parallel.test_orphan_ranks import SETS, alive, children, wait_for

ROOT = Path(__file__).resolve().parents[2]


def _torchrun(out: Path, *extra: str, **popen) -> subprocess.Popen:
    sets = [a for item in [*SETS, f"train.out_dir={out}", *extra] for a in ("--set", item)]
    return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                             "-m", "vfm_cli.main", "train", str(ROOT / "configs" / "tiny.toml"), *sets],
                            env={**os.environ, "OMP_NUM_THREADS": "1"}, text=True, **popen)


def _rank_lines(output: str) -> list[str]:
    """What the ranks printed (torchrun prefixes their tracebacks with [rankN]), without torchrun's own
    log lines and failure summary (its ChildFailedError traceback is the launcher's, not vfm's)."""
    return [line for line in output.splitlines() if line.startswith(("error:", "[rank"))]


@pytest.mark.slow
def test_a_layout_the_model_refuses_is_one_error_line_under_torchrun(tmp_path):
    proc = _torchrun(tmp_path / "run", "parallel.pp=2", "parallel.dp_shard=1", "model.options.depth=3",
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert _rank_lines(output) == ["error: config key 'parallel': parallel layout pp2 does not fit: num_layers 3 is "
                                   "not divisible by pp 2; accepted: pp 1, 3"]


@pytest.mark.slow
def test_a_sequence_sp_cannot_split_is_one_error_line_under_torchrun(tmp_path):
    # 1 x 6 x 6 latents in 2 x 2 patches: 9 tokens, which sp over tp 2 used to meet in the first forward
    proc = _torchrun(tmp_path / "run", "parallel.tp=2", "parallel.dp_shard=1", 'parallel.strategies=["sp"]',
                     "data.latent_shape=[3,1,6,6]", stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert _rank_lines(output) == ["error: config key 'parallel.strategies': data.latent_shape: latent (C, T, H, W) = "
                                   "(3, 1, 6, 6): sp splits each sequence over tp = 2 ranks, but a sequence of 9 tokens "
                                   "does not divide by 2; accepted: tp 1, 3, 9 (dividing 9), or the strategy tp instead "
                                   "of sp (every rank keeps the whole sequence)"]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process parents from /proc (Linux)")
def test_a_rank_killed_mid_run_ends_the_other_with_one_line(tmp_path):
    out = tmp_path / "run"
    log = tmp_path / "log.txt"
    with log.open("w") as fh:
        launcher = _torchrun(out, "parallel.tp=2", "parallel.dp_shard=1", stdout=fh, stderr=subprocess.STDOUT,
                             start_new_session=True)
        ranks: list[int] = []
        try:
            metrics = out / "metrics.jsonl"
            started = wait_for(lambda: metrics.is_file() and len(metrics.read_text().splitlines()) >= 2 or launcher.poll() is not None, 180, 0.2)
            assert started and launcher.poll() is None, f"no training step in 180 s: {log.read_text()[-2000:]}"
            ranks = sorted(children(launcher.pid))
            assert len(ranks) == 2
            os.kill(ranks[1], signal.SIGKILL)
            t0 = time.monotonic()
            assert wait_for(lambda: launcher.poll() is not None, 10.0), "torchrun still running 10 s after a rank was killed"
            print(f"torchrun ended {time.monotonic() - t0:.2f} s after a rank was killed")
        finally:
            for pid in [launcher.pid, *ranks]:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
    assert launcher.returncode == 1
    lines = _rank_lines(log.read_text())
    assert len(lines) == 1 and lines[0].startswith("error: rank 0 lost contact with another rank of this job"), lines


@pytest.mark.slow
def test_a_bad_flag_under_torchrun_is_printed_once_and_every_rank_exits_non_zero(tmp_path):
    # click's usage error happens before vfm's code: local rank 0 prints it, the other waits for torchrun
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           "-m", "vfm_cli.main", "train", str(ROOT / "configs" / "tiny.toml"), "--bogus"],
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, text=True, capture_output=True, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert output.count("No such option: --bogus") == 1, output
    assert output.count("Usage: ") == 1, output
    summary = output.split("Failures:", 1)[-1]  # torchrun's summary of each rank's exit
    assert "exitcode  : 2" in summary and ("exitcode  : -15" in summary or summary.count("exitcode  : 2") == 2), summary
