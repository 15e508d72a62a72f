"""Stopping a run on a signal: SIGTERM (a scheduler's or torchrun's warning before a kill) and SIGINT
(Ctrl-C) end the run after the current step with a checkpoint of that step, on every rank at the
same step, and ``resume = "auto"`` then continues it bitwise like a run never stopped."""

from __future__ import annotations

import os
import signal

import pytest
import torch
from safetensors.torch import load_file

from tests.gloo import spawn
from tests.parallel.trainer_helpers import EachBatch, build_parts, run_config, tiny_config
from tests.parallel.trainer_helpers import one_thread  # noqa: F401 (autouse: one CPU thread per test)
from vfm_parallel.trainer import TrainingStopped, from_dict, train
from vfm_parallel.trainer.ema import clean_fqn
from vfm_parallel.trainer.stopping import StopRequests


@pytest.fixture(autouse=True)
def caught_signals():
    """The test process survives its own signals even if the trainer installed no handler (then the
    run goes on to the end and the test fails on its assertions instead of killing pytest)."""
    got: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: got.append(signum)) for s in (signal.SIGTERM, signal.SIGINT)}
    yield got
    for s, handler in previous.items():
        signal.signal(s, handler)


class _SignalAt:
    """A metrics sink that sends this process ``signum`` when step ``at`` is logged, ``times`` times."""

    def __init__(self, at: int, signum: int, times: int = 1) -> None:
        self.at, self.signum, self.times = at, signum, times

    def log(self, step: int, metrics: dict) -> None:
        if step == self.at:
            for _ in range(self.times):
                os.kill(os.getpid(), self.signum)

    def close(self) -> None:
        pass


def _tensors(out_dir, step: int) -> dict:
    files = sorted((out_dir / "checkpoints" / f"step_{step:08d}" / "tensors").glob("*.safetensors"))
    return {k: v for f in files for k, v in load_file(f).items()}


def _weights(result) -> dict:
    return {clean_fqn(k): v.detach().clone() for k, v in result.model.named_parameters()}


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_after_the_step_with_its_checkpoint_and_resume_equals_a_straight_run(tmp_path, signum):
    straight = run_config(tiny_config(tmp_path / "a", train={"steps": 6}, logging={"interval": 1, "tensorboard": False}))
    cfg = tiny_config(tmp_path / "b", train={"steps": 6}, logging={"interval": 1}, checkpoint={"export": True})
    exported: list = []

    def build(ctx):
        parts = build_parts(ctx)
        parts.export = lambda folder, weights: exported.append(folder)
        return parts

    # The signal arrives while step 2 is logged: step 3 runs to its end, then the run stops.
    with pytest.raises(TrainingStopped) as info:
        train(from_dict(cfg), build, sinks=[_SignalAt(2, signum)])
    stopped = info.value
    assert (stopped.step, stopped.signal_name, stopped.exit_code) == (3, signal.Signals(signum).name, 128 + signum)
    assert stopped.checkpoint == tmp_path / "b" / "checkpoints" / "step_00000003"
    assert f"stopped by {signal.Signals(signum).name} after step 3 of 6" in str(stopped)
    assert "run the same command to resume" in str(stopped)
    assert exported == []  # an incomplete run exports nothing
    assert not isinstance(getattr(signal.getsignal(signum), "__self__", None), StopRequests)  # handlers restored
    # The same command continues it: the same losses, weights and EMA as the straight run.
    resumed = train(from_dict(cfg), build)
    assert resumed.start_step == 3
    assert {**stopped.result.losses, **resumed.losses} == straight.losses  # bitwise
    a, b = _weights(straight), _weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)
    ema_a, ema_b = _tensors(tmp_path / "a", 6), _tensors(tmp_path / "b", 6)
    assert all(torch.equal(ema_a[k], ema_b[k]) for k in ema_a if k.startswith(("ema.", "optim.")))
    assert exported == [tmp_path / "b" / "export"]


def test_the_step_a_signal_stops_at_is_logged_though_off_the_logging_interval(tmp_path):
    import json

    cfg = tiny_config(tmp_path, train={"steps": 12}, logging={"interval": 4})
    with pytest.raises(TrainingStopped) as info:
        train(from_dict(cfg), build_parts, sinks=[_SignalAt(4, signal.SIGTERM)])
    assert info.value.step == 5
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [4, 5]  # where the run stopped, as the checkpoint is
    assert rows[-1]["loss"] == info.value.result.losses[5]


def test_with_fused_adamw_the_stop_comes_at_the_next_flush(tmp_path):
    # Fused AdamW skips non-finite steps on the device, and the stop flag is read at the flushes
    # (every 4 steps here, and the first step), so as not to sync the host every step.
    cfg = tiny_config(tmp_path, train={"steps": 12}, optim={"fused": "on"}, logging={"interval": 4})
    with pytest.raises(TrainingStopped) as info:
        train(from_dict(cfg), build_parts, sinks=[_SignalAt(4, signal.SIGTERM)])
    assert info.value.step == 8
    assert info.value.checkpoint.name == "step_00000008"


def test_a_second_signal_stops_at_once_without_a_checkpoint(tmp_path, caught_signals):
    cfg = tiny_config(tmp_path, train={"steps": 6}, logging={"interval": 1})
    with pytest.raises(KeyboardInterrupt):
        train(from_dict(cfg), build_parts, sinks=[_SignalAt(2, signal.SIGINT, times=2)])
    assert not (tmp_path / "checkpoints").exists()


def _stop_on_rank_1(rank: int, world: int, root: str) -> dict:
    """A straight run, then a run in which only rank 1 gets SIGTERM (while drawing its 3rd batch),
    then its resume; what each rank saw."""
    from pathlib import Path

    signal.signal(signal.SIGTERM, lambda signum, frame: None)  # without the trainer's handler: no kill

    def signalled(ctx):
        parts = build_parts(ctx)
        if ctx.coords.rank == 1:
            def kill_at_third(n, batch):
                if n == 3:
                    os.kill(os.getpid(), signal.SIGTERM)
                return batch

            parts.loader = EachBatch(parts.loader, kill_at_third)
        return parts

    straight = train(from_dict(tiny_config(Path(root) / "a", train={"steps": 6}), world), build_parts)
    cfg = from_dict(tiny_config(Path(root) / "b", train={"steps": 6}), world)
    try:
        train(cfg, signalled)
        stopped = None
    except TrainingStopped as exc:
        stopped = exc
    resumed = train(cfg, build_parts)
    return {"stopped_at": stopped and stopped.step, "signal": stopped and stopped.signal_name,
            "checkpoint": stopped and str(stopped.checkpoint),
            "losses": {**(stopped.result.losses if stopped else {}), **resumed.losses}, "straight": straight.losses,
            "start": resumed.start_step, "same_weights": all(torch.equal(a, b) for a, b in
                                                             zip(_weights(straight).values(), _weights(resumed).values()))}


def test_one_rank_signalled_stops_both_ranks_after_the_same_step_and_resume_equals_a_straight_run(tmp_path):
    ranks = spawn(_stop_on_rank_1, 2, str(tmp_path))
    for seen in ranks:
        # Rank 1 got it during step 3 (its 3rd batch): both ranks stop after step 3, saved.
        assert seen["stopped_at"] == 3 and seen["signal"] == "SIGTERM"
        assert seen["checkpoint"] == str(tmp_path / "b" / "checkpoints" / "step_00000003")
        assert seen["start"] == 3
        assert seen["losses"] == seen["straight"] and seen["same_weights"]


def test_a_forked_loader_worker_keeps_working_through_the_first_signal_silently_and_ends_on_the_second(capfd):
    # A data-loader worker forked while the handler is installed: Ctrl-C reaches it too. It must go on
    # serving the step the trainer finishes (no KeyboardInterrupt, no second announcement) and still
    # end on the next signal, which is how the loader's shutdown (terminate()) ends it.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # what the worker's second signal comes back to
    read, write = os.pipe()
    with StopRequests() as stop:
        pid = os.fork()
        if pid == 0:  # the worker
            try:
                os.kill(os.getpid(), signal.SIGINT)
                os.write(write, b"alive")
                os.kill(os.getpid(), signal.SIGTERM)
                os.write(write, b" and still alive")
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert not stop.requested  # the worker's signals are its own
    os.close(write)
    assert os.read(read, 100) == b"alive"
    os.close(read)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
    assert "received" not in capfd.readouterr().err


def test_a_stop_on_a_step_skipped_as_non_finite_saves_no_checkpoint_of_it(tmp_path):
    def nan_third_batch(ctx):
        parts = build_parts(ctx)
        parts.loader = EachBatch(parts.loader, lambda n, batch: {**batch, "x0": torch.full_like(batch["x0"], float("nan"))}
                                 if n == 3 else batch)
        return parts

    cfg = tiny_config(tmp_path, train={"steps": 6}, checkpoint={"interval": 2}, logging={"interval": 1})
    with pytest.warns(RuntimeWarning, match="step 3 skipped"), pytest.raises(TrainingStopped) as info:
        train(from_dict(cfg), nan_third_batch, sinks=[_SignalAt(2, signal.SIGTERM)])
    assert info.value.step == 3 and info.value.checkpoint is None
    assert ("that step was not finite, so it was not saved; the same command resumes from the newest checkpoint, "
            f"{tmp_path / 'checkpoints' / 'step_00000002'}") in str(info.value)
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step_00000002"]
