"""A torchrun rank of a command wrapped by ``ends_torchrun_rank`` leaves through
``exit_before_teardown`` even when a ``ctx.call_on_close`` callback raises: the exception skipped the
exit, and the rank reached the interpreter teardown with gloo's threads running (the race that
aborts it, tests/cli/test_train_torchrun_teardown.py). Two real gloo ranks under torchrun; each rank's
``__main__`` holds an object whose ``__del__`` notes a teardown."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

RANK_SCRIPT = textwrap.dedent('''
    import os
    import sys

    import click
    import torch.distributed as dist

    from vfm_cli.torchrun_exit import ends_torchrun_rank

    NOTES, FAIL = sys.argv[1], sys.argv[2] == "fail"
    WHO = os.environ["RANK"]


    class AtTeardown:
        def __del__(self, open=open, join=os.path.join):  # runs when the teardown clears __main__
            with open(join(NOTES, WHO + ".teardown"), "w") as fh:
                fh.write("reached")


    probe = AtTeardown()


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
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           str(script), str(notes), mode], capture_output=True, text=True, env=env, timeout=180)
    return done, sorted(p.name for p in notes.iterdir())


@pytest.mark.parametrize("mode, status", [("succeed", 1), ("fail", 3)])
def test_a_raising_close_callback_does_not_skip_the_ranks_exit_before_the_teardown(tmp_path, mode, status):
    done, teardowns = _run(tmp_path, mode)
    output = done.stdout + done.stderr
    assert teardowns == [], output[-4000:]
    assert output.count("RuntimeError: the close callback broke") == 2, output[-4000:]  # reported once per rank
    assert f"exitcode  : {status} " in output.split("Failures:", 1)[-1], output[-4000:]
