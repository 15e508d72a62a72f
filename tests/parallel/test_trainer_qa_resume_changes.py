"""A resume says what changed: the settings it may change (lr, steps, keep) are named on one line, and
a refused change names the very option (``model.options.hidden 16 -> 32``, not two whole tables)
and what it would break (the model, not the sample sequence)."""

from __future__ import annotations

import pytest

from tests.parallel.trainer_helpers import run_config, tiny_config
from tests.parallel.trainer_helpers import one_thread  # noqa: F401 (autouse: one CPU thread per test)
from vfm_parallel.checkpoint import IncompatibleCheckpointError


def _model(hidden: int) -> dict:
    return {"family": "dit", "preset": "tiny", "options": {"hidden": hidden, "num_heads": 2}}


def test_a_resume_names_the_settings_changed_since_its_checkpoint(tmp_path, capsys):
    run_config(tiny_config(tmp_path, train={"steps": 2}, model=_model(16)))
    capsys.readouterr()
    resumed = run_config(tiny_config(tmp_path, train={"steps": 4}, model=_model(16), optim={"lr": 1e-3},
                                     checkpoint={"keep": 3}, logging={"interval": 2}))
    assert resumed.start_step == 2
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("changed since")]
    assert lines == ["changed since checkpoint step_00000002: optim.lr 0.003 -> 0.001; train.steps 2 -> 4; "
                     "checkpoint.keep 2 -> 3"]  # logging is not named: it changes nothing of the run


def test_how_the_data_is_read_is_not_named_as_a_change(tmp_path, capsys):
    # data.workers and data.subset_loading change who reads the samples, never which or in what order
    run_config(tiny_config(tmp_path, train={"steps": 2}))
    capsys.readouterr()
    resumed = run_config(tiny_config(tmp_path, train={"steps": 2, "stop_at": 0}, data={"workers": 1, "subset_loading": False}))
    assert resumed.start_step == 2
    assert not [line for line in capsys.readouterr().out.splitlines() if line.startswith("changed since")]


def test_a_changed_model_width_is_refused_naming_the_option_and_the_model(tmp_path):
    run_config(tiny_config(tmp_path, train={"steps": 2}, model=_model(16)))
    with pytest.raises(IncompatibleCheckpointError) as info:
        run_config(tiny_config(tmp_path, train={"steps": 4}, model=_model(32)))
    message = str(info.value)
    assert 'model.options.hidden 16 -> 32 ("model")' in message
    assert "num_heads" not in message  # unchanged options are not listed
    assert "the model is not the one saved" in message and "sample sequence" not in message


def test_resume_naming_an_older_checkpoint_of_the_run_is_refused_while_newer_ones_are_there(tmp_path):
    # A rollback (or a requeued job whose command still names its first checkpoint): the newer
    # checkpoints would be taken by "auto" after any restart, or the run would redo its steps.
    cfg = tiny_config(tmp_path, train={"steps": 6}, checkpoint={"interval": 2, "keep": 3})
    run_config(cfg)
    root = tmp_path / "checkpoints"
    cfg["checkpoint"]["resume"] = str(root / "step_00000002")
    with pytest.raises(IncompatibleCheckpointError) as info:
        run_config(cfg)
    message = str(info.value)
    assert f"checkpoint.resume names {root / 'step_00000002'} (step 2), but {root} holds newer checkpoints: " \
           "step_00000004, step_00000006" in message
    assert 'checkpoint.resume = "auto"' in message and "move them out of" in message
    # Moved away, the rollback runs from step 2.
    aside = tmp_path / "rolled-back"
    aside.mkdir()
    for name in ("step_00000004", "step_00000006"):
        (root / name).rename(aside / name)
    assert run_config(cfg).start_step == 2


@pytest.mark.parametrize(("saved", "resumed"), [("off", "on"), ("on", "off")])
def test_a_run_resumes_with_its_own_adamw_kernel_not_the_checkpoints(tmp_path, saved, resumed):
    # a run saved on CPU (the foreach kernel) resumed on CUDA (fused, with its device-side skip of a
    # non-finite step), and back: the kernel is the resuming run's, the training the same
    reference = run_config(tiny_config(tmp_path / "ref", train={"steps": 4}, optim={"fused": resumed}))
    run_config(tiny_config(tmp_path / "run", train={"steps": 4, "stop_at": 2}, optim={"fused": saved}))
    again = run_config(tiny_config(tmp_path / "run", train={"steps": 4}, optim={"fused": resumed}))
    assert again.start_step == 2
    assert again.losses == pytest.approx({s: reference.losses[s] for s in (3, 4)}, rel=1e-5)
