"""A metrics sink that cannot write (a full disk, stdout piped into ``head``) stops logging there with
one warning; the training and the other sinks go on, instead of the run dying with a traceback."""

from __future__ import annotations

import json
import os

import pytest

from tests.parallel.trainer_helpers import run_config, tiny_config
from tests.parallel.trainer_helpers import one_thread  # noqa: F401 (autouse: one CPU thread per test)
from vfm_parallel.trainer import TrainingWarning
from vfm_parallel.trainer.metrics import ConsoleSink


def test_a_console_on_a_closed_pipe_is_dropped_with_a_warning_and_the_run_completes(tmp_path):
    read, write = os.pipe()
    os.close(read)  # as `vfm train ... | head -2` after head has exited
    stream = os.fdopen(write, "w")
    with pytest.warns(TrainingWarning, match=r"step 1: metrics could not be written to ConsoleSink \(BrokenPipeError"):
        result = run_config(tiny_config(tmp_path, train={"steps": 6}, logging={"interval": 1}),
                            sinks=[ConsoleSink(6, stream)])
    assert result.final_step == 6 and (tmp_path / "checkpoints" / "step_00000006").is_dir()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2, 3, 4, 5, 6]  # the other sinks kept every step
