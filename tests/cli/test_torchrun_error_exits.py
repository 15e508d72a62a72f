"""A 2-rank ``vfm train`` / ``vfm generate`` under torchrun that fails after its process group started
(a checkpoint the run cannot resume from, a size the tokenizer cannot take) exits 1 with its one
``error:`` line, every time: no rank reaches the interpreter's teardown with gloo worker threads
running, the race that aborts a rank (SIGABRT, "terminate called without an active exception") in
place of its exit 1 (vfm_parallel.process_group.exit_before_teardown).

The abort itself depends on the scheduler; what makes it possible does not: the probe of
tests/cli/test_train_torchrun_teardown.py, loaded into every process, counts the gloo threads at the
teardown. Each case also runs a few times, as a user would meet it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cli.probed_torchrun import rank_notes, run_probed_torchrun
from tests.cli.test_export_checkpoint import _step_dir, one_process_run  # noqa: F401 - fixture
from tests.cli.test_train_torchrun_teardown import PROBE, QUICK, TINY
from tests.conftest import plugin_env
from tests.plugins.conftest import write_plugin

RUNS = 3


def _assert_exits_1_with(done: subprocess.CompletedProcess, notes: Path, error: str) -> None:
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-4000:]
    assert [line for line in output.splitlines() if line.startswith(("error:", "[rank"))] == [error], output[-4000:]
    assert "terminate called" not in output and "Signal 6" not in output, output[-4000:]
    summary = output.split("Failures:", 1)[-1]  # torchrun's summary of each rank's exit: rank 0's is 1
    assert "exitcode  : 1 " in summary and "exitcode  : -6" not in summary, summary
    alive = {name: int(text) for name, text in rank_notes(notes, "teardown").items()}
    assert all(count == 0 for count in alive.values()), f"gloo threads running at a rank's teardown: {alive}"


@pytest.mark.slow
def test_a_2_rank_train_that_fails_after_its_process_group_started_exits_1_with_its_error_every_time(tmp_path):
    missing = tmp_path / "nothing" / "step_00000001"
    for i in range(RUNS):
        notes = tmp_path / f"notes{i}"
        notes.mkdir()
        sets = [a for item in [*QUICK, f"train.out_dir={tmp_path / f'run{i}'}", f"checkpoint.resume={missing}"]
                for a in ("--set", item)]
        done = run_probed_torchrun(tmp_path, PROBE, notes, "train", str(TINY), *sets)
        _assert_exits_1_with(done, notes, f"error: {missing} is not a committed checkpoint (no such folder)")


@pytest.mark.slow
def test_a_2_rank_generate_that_fails_after_its_process_group_started_exits_1_with_its_error_every_time(one_process_run, tmp_path):  # noqa: F811
    for i in range(RUNS):
        notes = tmp_path / f"notes{i}"
        notes.mkdir()
        done = run_probed_torchrun(tmp_path, PROBE, notes, "generate", "--checkpoint", str(_step_dir(one_process_run)),
                                   "--prompt", "3", "--steps", "1", "--size", "17x24", "-o", str(tmp_path / f"out{i}"))
        output = done.stdout + done.stderr
        errors = [line for line in output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, output[-4000:]
        _assert_exits_1_with(done, notes, errors[0])


#: a strategy plugin that forgets ``return model``: found when the model is parallelized, after the group started
_RETURNS_NOTHING = """
from vfm_parallel.plugins import hookimpl


class InPlace:
    name = "oops-inplace"
    phase = "compile"
    mesh_dims = ()

    def apply(self, model, mesh, plan):
        model.touched = True


@hookimpl
def vfm_parallel_register_strategies(register):
    register("oops-inplace", InPlace)
"""


@pytest.mark.slow
def test_a_2_rank_train_whose_plugin_breaks_its_contract_after_the_group_started_says_it_in_one_error_line(tmp_path):
    root = write_plugin(tmp_path / "plugin", "vfm-oops-returns", {"oops_returns": _RETURNS_NOTHING},
                        {"vfm_parallel": "oops_returns"})
    notes = tmp_path / "notes"
    notes.mkdir()
    sets = [a for item in [*QUICK, f"train.out_dir={tmp_path / 'run'}",
                                 'parallel.strategies=["fsdp", "oops-inplace"]']
            for a in ("--set", item)]
    done = run_probed_torchrun(tmp_path, PROBE, notes, "train", str(TINY), *sets, env=plugin_env([root]))
    assert "PluginResultError" not in done.stderr, done.stderr[-4000:]  # one process's line (vfm_cli.main), no traceback
    _assert_exits_1_with(done, notes, "error: strategy 'oops-inplace' (from vfm-oops-returns 0.0.1): apply returned "
                                      "None; it must return the model (the one it was given, changed in place, or its "
                                      "wrapper)")
