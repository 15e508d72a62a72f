"""TensorBoard after a resume: a run killed after logging steps past its last checkpoint, then resumed,
shows each step once with the resumed run's values (not the curve going back and drawing the
steps twice), and the logged learning rate starts at lr / warmup_steps and ends at lr * min_lr_ratio."""

from __future__ import annotations

import shutil

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.parallel.trainer_helpers import run_config, tiny_config
from tests.parallel.trainer_helpers import one_thread  # noqa: F401 (autouse: one CPU thread per test)


def _scalars(folder, tag: str) -> list[tuple[int, float]]:
    events = EventAccumulator(str(folder))
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars(tag)]


def test_a_resume_replaces_the_steps_logged_after_its_checkpoint_and_the_lr_ends_are_logged(tmp_path):
    cfg = tiny_config(tmp_path, train={"steps": 6}, checkpoint={"interval": 2, "keep": 3},
                      optim={"lr": 4e-3, "warmup_steps": 2, "min_lr_ratio": 0.25},
                      logging={"interval": 1, "tensorboard": True})
    cfg["train"]["stop_at"] = 5
    first = run_config(cfg)
    # Killed after step 5 was logged, before its checkpoint was committed: the resume starts at 4.
    shutil.rmtree(tmp_path / "checkpoints" / "step_00000005")
    cfg["train"]["stop_at"] = 0
    resumed = run_config(cfg)
    assert resumed.start_step == 4
    losses = _scalars(tmp_path / "tensorboard", "train/loss")
    assert [step for step, _ in losses] == [1, 2, 3, 4, 5, 6]
    assert [value for _, value in losses] == pytest.approx([first.losses[s] for s in (1, 2, 3, 4)] +
                                                           [resumed.losses[s] for s in (5, 6)])
    lr = dict(_scalars(tmp_path / "tensorboard", "train/lr"))
    assert lr[1] == pytest.approx(4e-3 / 2) and lr[2] == pytest.approx(4e-3)  # warm-up: step 1 trains already
    assert lr[6] == pytest.approx(4e-3 * 0.25)  # the cosine reaches lr * min_lr_ratio at the last step
