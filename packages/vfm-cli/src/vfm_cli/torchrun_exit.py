"""How a rank of ``vfm train`` / ``vfm generate`` under torchrun ends once its process group is up:
every way out (success, a stop, an ``error:`` line, a traceback) leaves through
:mod:`vfm_parallel.process_group`, never through the interpreter's teardown, which gloo's worker
threads can abort (SIGABRT and a core dump in place of exit 1: ``leave_distributed``'s docstring).
"""

from __future__ import annotations

import functools
from typing import Any, Callable


def ends_torchrun_rank(command: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a typer command: in a torchrun rank whose process group started, its end is handed to
    vfm-parallel with the exit status the command meant: 0 after a barrier every rank reaches
    (``leave_distributed``), any other status at once (``exit_before_teardown``, no barrier: a failing
    rank cannot know that its peers will reach a barrier). The command's context is closed first, so
    what it registered with ``ctx.call_on_close`` (the output folder's lock) is released; a callback
    that raises, or a barrier that fails, is reported and the rank still leaves this way (status 1). In one process a
    success leaves the single-rank group a mesh strategy started, as a rank leaves its group; an error
    there, and anything before a torchrun rank's group started, ends as it would unwrapped."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> None:
        from vfm_parallel.process_group import exit_before_teardown, leave_distributed, shutdown_distributed

        try:
            command(*args, **kwargs)
        except BaseException as exc:
            if not _group_started():
                raise
            code = _report(exc)
        else:
            if not _group_started():
                shutdown_distributed()  # one process: the single-rank group of a mesh strategy, if any
                return
            code = 0
        code = _close(kwargs.get("ctx"), code)
        if code == 0:
            try:
                leave_distributed(0)
            except BaseException as exc:  # its barrier failed (a peer is gone): leave as a failing rank does
                code = _report(exc) or 1
        if code != 0:
            _linger()
        # no barrier (the peers may never reach it), no teardown; exit_before_teardown called
        # directly, because a barrier that failed above may have left the group half torn down
        exit_before_teardown(code)

    return run


#: How long a failing rank stays before it exits (seconds).
LINGER_S = 2.0


def _linger() -> None:
    """Wait a moment before a failing rank exits. Its peers are often printing the same agreed
    ``error:`` line at that moment; once this rank exits, its node's torchrun agent ends, and when
    that agent hosts the c10d rendezvous store, every other node's agent loses the store and
    SIGTERMs its rank before the line is printed (seen on a loaded machine: node B's log then held
    only torchrun's RendezvousConnectionError). No barrier: a peer may never come (a failing rank
    cannot know), and a bounded wait costs a failed start two seconds."""
    import time

    time.sleep(LINGER_S)


def _close(ctx: Any, code: int) -> int:
    """Close the command's context (its ``call_on_close`` callbacks); the exit status after it. A
    callback that raises is reported as the command's errors are and makes a success exit 1, but never
    skips the exit that follows: the interpreter teardown it would reach races gloo's threads."""
    if ctx is None:
        return code
    try:
        ctx.close()
    except BaseException as exc:
        closing = _report(exc)
        return code or closing or 1
    return code


def _group_started() -> bool:
    import os

    if os.environ.get("TORCHELASTIC_RUN_ID") is None:
        return False
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def _report(exc: BaseException) -> int:
    """The exit status ``exc`` stands for, after printing what one process prints for it (click, or
    :func:`vfm_cli.main.main` for a plugin error)."""
    import sys
    import traceback

    if hasattr(exc, "show") and hasattr(exc, "exit_code"):  # a usage error raised inside the command
        exc.show()
        return int(exc.exit_code)
    if hasattr(exc, "exit_code"):  # typer.Exit: the command said its status (its message is printed)
        return int(exc.exit_code)
    if isinstance(exc, SystemExit):
        return exc.code if isinstance(exc.code, int) else 1
    from vfm_plugins import PluginError

    from vfm_cli.failing import error_line, wait_for_local_rank_0

    if isinstance(exc, PluginError):  # a plugin that breaks its contract: one line, as vfm_cli.main says it
        wait_for_local_rank_0()  # every rank meets it alike (a strategy's apply): one line per node
        error_line(exc)
        return 1
    if isinstance(exc, KeyboardInterrupt):
        print("interrupted", file=sys.stderr)
        return 130
    traceback.print_exception(exc)  # a bug: the traceback, as Python would print it, and exit 1
    return 1
