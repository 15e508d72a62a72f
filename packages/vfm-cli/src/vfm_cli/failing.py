"""How a command stops on bad input: one plain ``error: ...`` line on stderr and exit status 1 (once per
node under torchrun: :func:`fail_once`; a lost peer rank recognised by :func:`peer_lost`).

Plain text on purpose: a reason may quote a file name or a config key in brackets (``[shard]``),
which a rich markup string would swallow as a style tag; control characters in it (a file name's ESC) are
printed escaped (:func:`vfm_plugins.printable`).
"""

from __future__ import annotations

from typing import NoReturn

import typer

from vfm_plugins.text import printable


def fail(message: object) -> NoReturn:
    """Print ``error: <message>`` on stderr and exit 1 (inside ``except``, the cause stays chained)."""
    error_line(message)
    raise typer.Exit(1)


def error_line(message: object) -> None:
    """Print ``error: <message>`` on stderr."""
    typer.echo(f"error: {printable(message)}", err=True)  # a reason may quote a file name: no terminal controls


def fail_once(exc: Exception) -> None:
    """``error: ...`` and exit 1, printed once per node rather than by every rank: under torchrun
    every rank of a node fails alike on a bad config, so local rank 0 prints the line and the
    others exit silently once torchrun stops them for rank 0's exit. A rank whose local rank 0 did
    not fail prints it itself after a moment (no error is lost)."""
    wait_for_local_rank_0()
    fail(exc)


def own_traceback_first(agreed: BaseException | None, refusals: tuple[type[BaseException], ...]) -> None:
    """Under torchrun an error the ranks agree on (vfm_parallel.preflight.PreflightError) is one line on every
    rank; on the rank whose own failure under it (its ``__cause__``) is no refusal (``refusals``, nor a usage
    error or an exit, told by duck type as :mod:`vfm_cli.torchrun_exit` tells them: typer carries its own copy
    of click's classes) but a bug or an I/O error, print that failure's traceback first, as one process shows
    it: the line names the rank, its log then shows where it failed. Nothing for any other error."""
    from vfm_parallel.preflight import PreflightError

    own = agreed.__cause__ if isinstance(agreed, PreflightError) else None
    if own is not None and not isinstance(own, refusals) and not hasattr(own, "exit_code"):
        import traceback

        traceback.print_exception(own)


def wait_for_local_rank_0() -> None:
    """Before a rank other than its node's local rank 0 reports an error that every rank meets alike
    (a bad config, a bad flag): a moment's wait, in which torchrun ends this rank for local rank 0's
    exit. Returns at once outside torchrun and on local rank 0."""
    import os
    import time

    if int(os.environ.get("LOCAL_WORLD_SIZE", "1")) > 1 and int(os.environ.get("LOCAL_RANK", "0")) != 0:
        time.sleep(_QUIET_WAIT_S)  # torchrun ends this rank here when local rank 0 has failed too


_QUIET_WAIT_S = 5.0

#: What gloo (and NCCL) say when the rank at the other end of a collective has gone.
_PEER_LOST = ("Connection reset by peer", "Connection closed by peer", "Broken pipe", "NCCL communicator was aborted")


def who_was_lost() -> str:
    """Where to look for the rank whose loss :func:`peer_lost` recognised: torchrun's failure summary
    names only the ranks its own node ran, so on a job of several nodes the lost one may be in
    another node's log (or, a node that died whole, in none)."""
    from vfm_parallel.process_group import env_several_nodes

    if env_several_nodes():
        return ("torchrun's summary names it if it ran on this node; else see another node's log, or whether that "
                "node is up")
    return "torchrun's summary names it"


def peer_lost(exc: BaseException) -> str | None:
    """The backend's message, shortened, if ``exc`` says a peer rank is gone; else None."""
    text = str(exc)
    if not any(marker in text for marker in _PEER_LOST):
        return None
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return first.split("] ", 1)[-1].split(". This is typically")[0]  # gloo's '[.../pair.cc:537] Read error ...'
