"""A torchrun rank of a command wrapped by ``ends_torchrun_rank`` leaves through
``exit_before_teardown`` even when a ``ctx.call_on_close`` callback raises: the exception skipped the
exit, and the rank reached the interpreter teardown with gloo's threads running (the race that
aborts it, tests/cli/test_train_torchrun_teardown.py). Two real gloo ranks under torchrun, each with
that file's teardown probe."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.cli.probed_torchrun import rank_notes, run_probed_torchrun
from tests.cli.test_train_torchrun_teardown import PROBE

RANK_SCRIPT = textwrap.dedent('''
    import sys

    import click
    import torch.distributed as dist

    from vfm_cli.torchrun_exit import ends_torchrun_rank

    FAIL = sys.argv[1] == "fail"


    def broken_close():
        raise RuntimeError("the close callback broke")


    def command(ctx):
        dist.init_process_group("gloo")
        dist.all_reduce(__import__("torch").ones(4))
        ctx.call_on_close(broken_close)
        if FAIL:
            raise click.exceptions.Exit(3)


    ctx = click.Context(click.Command("probe"))
    ends_torchrun_rank(command)(ctx=ctx)
''')


def _run(tmp_path: Path, mode: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    notes = tmp_path / f"notes-{mode}"
    notes.mkdir()
    done = run_probed_torchrun(tmp_path, PROBE, notes, mode, script=script)
    return done, sorted(rank_notes(notes, "teardown"))


@pytest.mark.parametrize("mode, status", [("succeed", 1), ("fail", 3)])
def test_a_raising_close_callback_does_not_skip_the_ranks_exit_before_the_teardown(tmp_path, mode, status):
    done, teardowns = _run(tmp_path, mode)
    output = done.stdout + done.stderr
    assert teardowns == [], output[-4000:]
    assert output.count("RuntimeError: the close callback broke") == 2, output[-4000:]  # reported once per rank
    assert f"exitcode  : {status} " in output.split("Failures:", 1)[-1], output[-4000:]
