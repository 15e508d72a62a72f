"""The trainer in one process: it learns, it resumes bitwise, and it writes its metrics."""

from __future__ import annotations

import json

import pytest
import torch

from tests.parallel.trainer_helpers import checkpoint_ema, run_config, tiny_config
from tests.parallel.trainer_helpers import one_thread  # noqa: F401 (autouse: one CPU thread per test)
from vfm_parallel.trainer.ema import clean_fqn
from vfm_parallel.trainer.mfu import mfu


def _weights(result):
    return {clean_fqn(k): v.detach().clone() for k, v in result.model.named_parameters()}


def test_a_tiny_run_lowers_the_loss_and_writes_tensorboard_and_a_loss_curve(tmp_path):
    cfg = tiny_config(tmp_path, train={"steps": 40}, optim={"lr": 1e-2, "warmup_steps": 3},
                      logging={"tensorboard": True, "loss_curve": True})
    result = run_config(cfg)
    losses = [result.losses[s] for s in sorted(result.losses)]
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.8 * first, f"loss went {first:.4f} -> {last:.4f}"
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 41))
    row = rows[-1]
    assert row["mfu"] == pytest.approx(mfu(1000.0, row["tokens_per_s"], 1, 1.0))
    assert row["tokens_per_s"] > 0 and row["grad_norm"] > 0
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    logged = [e.value for e in events.Scalars("train/loss")]
    assert logged == pytest.approx(losses)
    assert (tmp_path / "loss_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_stop_and_resume_is_bitwise_equal_to_a_straight_run(tmp_path):
    straight = run_config(tiny_config(tmp_path / "a", train={"steps": 6}))
    split_cfg = tiny_config(tmp_path / "b", train={"steps": 6, "stop_at": 3})
    first = run_config(split_cfg)
    assert first.final_step == 3 and (tmp_path / "b" / "checkpoints" / "step_00000003").is_dir()
    split_cfg["train"]["stop_at"] = 0
    resumed = run_config(split_cfg)
    assert resumed.start_step == 3 and resumed.final_step == 6
    assert {**first.losses, **resumed.losses} == straight.losses  # bitwise: == on floats
    a, b = _weights(straight), _weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)
    # and the EMA weights, through the checkpoints written at the end
    ema_a, ema_b = checkpoint_ema(tmp_path / "a", 6), checkpoint_ema(tmp_path / "b", 6)
    assert ema_a and ema_a.keys() == ema_b.keys()
    assert all(torch.equal(ema_a[k], ema_b[k]) for k in ema_a)


def test_resume_none_starts_over_and_a_bad_resume_path_is_an_error(tmp_path):
    cfg = tiny_config(tmp_path, train={"steps": 2})
    run_config(cfg)
    cfg["checkpoint"]["resume"] = "none"
    assert run_config(cfg).start_step == 0
    cfg["checkpoint"]["resume"] = str(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="not a committed checkpoint"):
        run_config(cfg)


def test_activation_checkpointing_in_one_process_trains_bitwise_like_the_plain_run(tmp_path):
    plain = run_config(tiny_config(tmp_path / "plain", train={"steps": 4}))
    checkpointed = run_config(tiny_config(tmp_path / "ac", train={"steps": 4}, parallel={"activation_checkpointing": True}))
    assert checkpointed.losses == plain.losses  # recomputation on CPU is deterministic: bitwise
    a, b = _weights(plain), _weights(checkpointed)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_compile_in_one_process_needs_no_process_group_and_trains_like_eager(tmp_path):
    import torch.distributed as dist

    eager = run_config(tiny_config(tmp_path / "eager", train={"steps": 4}))
    compiled = run_config(tiny_config(tmp_path / "compiled", train={"steps": 4}, parallel={"compile": True}))
    assert not dist.is_initialized()  # compile alone starts no process group
    steps = sorted(eager.losses)
    assert [compiled.losses[s] for s in steps] == pytest.approx([eager.losses[s] for s in steps], rel=1e-4)


def test_fsdp_named_in_one_process_runs_on_a_single_rank_group(tmp_path):
    import torch.distributed as dist

    plain = run_config(tiny_config(tmp_path / "plain", train={"steps": 3}))
    try:
        sharded = run_config(tiny_config(tmp_path / "fsdp", train={"steps": 3}, parallel={"strategies": ["fsdp"]}))
        assert dist.is_initialized() and dist.get_world_size() == 1
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    steps = sorted(plain.losses)
    assert [sharded.losses[s] for s in steps] == pytest.approx([plain.losses[s] for s in steps], rel=1e-5)


def test_an_mfu_above_100_percent_against_a_peak_measured_low_is_named_once(tmp_path, monkeypatch):
    import warnings

    from vfm_parallel.trainer import trainer as trainer_mod
    from vfm_parallel.trainer.health import TrainingWarning
    from vfm_parallel.trainer.mfu import MEASURED

    # the CPU peak as a busy machine measures it: far below what the steps then reach
    monkeypatch.setattr(trainer_mod, "device_peak_tflops", lambda device, override=0.0: (1e-9, MEASURED))
    cfg = tiny_config(tmp_path, train={"steps": 4}, logging={"peak_tflops": 0.0})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_config(cfg)
    said = [str(w.message) for w in caught if issubclass(w.category, TrainingWarning) and "MFU" in str(w.message)]
    assert len(said) == 1 and "above 100%" in said[0] and "logging.peak_tflops" in said[0], said


def test_an_mfu_above_100_percent_against_a_peak_the_user_gave_says_nothing(tmp_path):
    import warnings

    cfg = tiny_config(tmp_path, train={"steps": 2}, logging={"peak_tflops": 1e-9})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_config(cfg)
    assert not [w for w in caught if "MFU" in str(w.message)]
