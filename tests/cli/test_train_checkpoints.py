"""``vfm train`` resuming: a damaged or mismatched checkpoint is one line on stderr and exit 1, a
fallback is a warning line, the resume is announced, and a torchrun job killed (SIGKILL) during its
saves leaves a newest checkpoint that verifies whole and resumes."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from vfm_cli.main import app

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SMALL = ["train.steps=4", "optim.warmup_steps=1", "checkpoint.interval=2", "checkpoint.export=false",
         "logging.tensorboard=false", "logging.progress=false", "logging.loss_curve=false", "logging.peak_tflops=1.0",
         "data.num_samples=16", "model.options.hidden=16", "model.options.num_heads=2", "model.options.depth=1"]


def _train(out: Path, *items: str, validate: bool = False):
    args = [arg for item in (*SMALL, f"train.out_dir={out}", *items) for arg in ("--set", item)]
    return CliRunner().invoke(app, ["train", str(CONFIGS / "tiny.toml"), *args, *["--validate"] * validate])


def test_vfm_train_refuses_a_damaged_or_mismatched_checkpoint_in_one_line_and_falls_back_on_auto(tmp_path):
    assert _train(tmp_path, "train.stop_at=4").exit_code == 0
    step4 = tmp_path / "checkpoints" / "step_00000004"
    state = step4 / "state.json"
    state.write_text(state.read_text().replace('"step": 4', '"step": 40'))

    named = _train(tmp_path, f"checkpoint.resume={step4}")
    assert named.exit_code == 1
    errors = [line for line in named.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and str(step4) in errors[0] and "state.json" in errors[0]
    assert "Traceback" not in named.output

    seed = _train(tmp_path, "train.seed=99")  # falls back to step 2, whose seed differs
    assert seed.exit_code == 1
    assert "warning:" in seed.output and "step_00000002" in seed.output
    assert "error:" in seed.output and "train.seed" in seed.output and "checkpoint.allow_changes" in seed.output

    resumed = _train(tmp_path)
    assert resumed.exit_code == 0, resumed.output
    assert f"resuming from step 2 ({tmp_path / 'checkpoints' / 'step_00000002'})" in resumed.output


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (from /proc: this machine's test processes only)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def test_torchrun_killed_during_saves_leaves_a_newest_checkpoint_that_verifies_and_resumes(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from vfm_parallel import checkpoint as ckpt

    items = [*SMALL, "train.steps=400", "checkpoint.interval=1", "checkpoint.keep=2", f"train.out_dir={tmp_path}"]
    args = [arg for item in items for arg in ("--set", item)]
    launcher = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                                 "-m", "vfm_cli.main", "train", str(CONFIGS / "tiny.toml"), *args],
                                env={**os.environ, "OMP_NUM_THREADS": "1"}, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = tmp_path / "checkpoints"
    try:
        deadline = time.monotonic() + 240
        while not (len(ckpt.list_checkpoints(root)) >= 2 and any(p.name.startswith(".tmp-") for p in root.iterdir())):
            assert time.monotonic() < deadline and launcher.poll() is None, "no save under way"
            time.sleep(0.01)
        doomed = [launcher.pid, *_descendants(launcher.pid)]  # the ranks run in process groups of their own
        for pid in doomed:  # launcher and both ranks, mid-save
            os.kill(pid, signal.SIGKILL)
        launcher.wait(timeout=30)
        while any(Path(f"/proc/{pid}").exists() and _state(pid) != "Z" for pid in doomed[1:]):
            assert time.monotonic() < deadline + 30, "a rank outlived SIGKILL"
            time.sleep(0.01)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
    newest = ckpt.latest(root)
    state = ckpt.verify(newest)  # whole: every file as its manifest lists it
    resumed = _train(tmp_path, "train.steps=400", f"train.stop_at={state['step'] + 1}", "optim.grad_accum=2",
                     'checkpoint.allow_changes=["layout"]')  # one process continues the 2-rank run's batches
    assert resumed.exit_code == 0, resumed.output
    assert f"resuming from step {state['step']} ({newest})" in resumed.output


def test_validate_refuses_a_named_checkpoint_with_newer_ones_in_the_run_as_the_run_does(tmp_path):
    # a rollback to step 2 while step 4 is still there: the run refuses it, so --validate must too
    assert _train(tmp_path).exit_code == 0
    step2 = tmp_path / "checkpoints" / "step_00000002"
    validated = _train(tmp_path, f"checkpoint.resume={step2}", validate=True)
    run = _train(tmp_path, f"checkpoint.resume={step2}")
    for result in (validated, run):
        assert result.exit_code == 1, result.output
        assert f"checkpoint.resume names {step2} (step 2), but {tmp_path / 'checkpoints'} holds newer checkpoints: " \
               "step_00000004" in result.output
    ok = _train(tmp_path, f"checkpoint.resume={step2.parent / 'step_00000004'}", validate=True)
    assert ok.exit_code == 0 and "resumes from step 4" in ok.output, ok.output


def test_validate_with_auto_resume_passes_a_damaged_newest_checkpoint_as_the_run_does(tmp_path):
    # the run falls back to the newest intact checkpoint with a warning, so --validate must not refuse
    assert _train(tmp_path, "train.stop_at=4").exit_code == 0
    state = tmp_path / "checkpoints" / "step_00000004" / "state.json"
    state.write_text(state.read_text().replace('"step": 4', '"step": 40'))
    validated = _train(tmp_path, validate=True)
    assert validated.exit_code == 0, validated.output
    assert "warning:" in validated.output and "resumes from step 2" in validated.output
    (tmp_path / "checkpoints" / "step_00000002" / "state.json").write_text("{")  # every one damaged: refused
    assert _train(tmp_path, validate=True).exit_code == 1
