"""The ranks of a torchrun job agree whether it may start: a check that failed on some ranks only (a node
without its shards, rank 0 refused by a lock) stops every rank at once, each with the same error naming
the ranks that failed, their hosts and reasons, instead of leaving the other ranks waiting for the failed
ones in the process group's start or in a collective (gloo's and NCCL's 30 minutes)."""

from __future__ import annotations

import contextlib
import socket
from typing import Iterator

import torch.distributed as dist

from vfm_parallel.process_group import env_world_size, init_distributed


class PreflightError(RuntimeError):
    """Raised alike on every rank of a job where some ranks' checks failed before it began: the
    ``failures`` as (rank, host, reason), in rank order."""

    def __init__(self, failures: list[tuple[int, str, str]]) -> None:
        self.failures = failures
        super().__init__(_describe(failures))


def agree(failure: BaseException | None, device_type: str | None = None) -> BaseException | None:
    """What every rank of the job raises for the checks each rank just ran (``failure``: this rank's
    error, or None): None where every rank passed; ``failure`` itself in one process (nothing to agree
    on: no process group is started for it) or where every rank failed with the same reason (a bad
    config: each says it as it would alone); else a :class:`PreflightError` naming each failed rank,
    the same on every rank.

    Collective under torchrun: every rank calls it at the same point, the ones that failed too, and
    the process group starts here if it is not up (``device_type`` chooses its backend; None: it is up). The
    exchange runs over gloo, on a group of its own under NCCL, so that it needs no CUDA tensor
    (this rank's device may not be set yet, and a rank whose GPU failed still answers)."""
    if env_world_size() <= 1:
        return failure
    if not dist.is_initialized():
        if device_type is None:
            raise ValueError("agree(device_type=None) needs the process group started")
        try:
            init_distributed(device_type)
        except (ValueError, RuntimeError):  # no group to agree in (WORLD_SIZE set without torchrun's rendezvous
            if failure is not None:         # variables, a rendezvous that failed): this rank's own error, said as
                return failure              # in one process, rather than the start's
            raise
    seen: list = [None] * dist.get_world_size()
    dist.all_gather_object(seen, (None if failure is None else reason_of(failure), socket.gethostname()),
                           group=_object_group())
    failed = [(rank, host, reason) for rank, (reason, host) in enumerate(seen) if reason is not None]
    if not failed:
        return None
    if len(failed) == len(seen) and len({reason for _, _, reason in failed}) == 1:  # this rank's among them
        return failure
    error = PreflightError(failed)
    error.__cause__ = failure  # on a rank that failed: its own error, traceback and all
    return error


@contextlib.contextmanager
def checked_together(device_type: str | None = None) -> Iterator[None]:
    """``with checked_together(): work`` where ``work`` may fail on some ranks only (it reads node-local
    files): every rank then raises what :func:`agree` says, the ranks whose work passed too. In one
    process, the work's own error as it is."""
    if env_world_size() <= 1:
        yield
        return
    failure = None
    try:
        yield
    except Exception as exc:  # not Ctrl-C or an exit: torchrun sends those to every rank
        failure = exc
    agreed = agree(failure, device_type)  # the work's own error where every rank failed alike
    if agreed is not None:
        raise agreed


def reason_of(exc: BaseException) -> str:
    """What ``exc`` says in one line: a usage error as click words it (``Invalid value for '--prompts':
    ...``), else its message, else its type."""
    from vfm_plugins.text import exception_text

    formatted = getattr(exc, "format_message", None)
    text = formatted() if callable(formatted) else exception_text(exc)
    text = " ".join(text.split())
    return text or type(exc).__name__


def _describe(failures: list[tuple[int, str, str]]) -> str:
    """``rank 1 (host node-b): REASON``; the ranks that failed alike in one part (``ranks 8-15 (host
    node-b)``), parts in order of the first rank that failed."""
    by_reason: dict[str, list[tuple[int, str]]] = {}
    for rank, host, reason in failures:
        by_reason.setdefault(reason, []).append((rank, host))
    parts = [f"{ranks_on_hosts(where)}: {reason}" for reason, where in by_reason.items()]
    whom = "it" if len(failures) == 1 else "them"
    return f"{'; '.join(parts)} (every rank of the job stopped for {whom} before it began)"


def ranks_on_hosts(where: list[tuple[int, str]]) -> str:
    """``rank 3 (host b)``, ``ranks 0-7 (host a), 16 (host c)``: runs of consecutive ranks on one host."""
    runs: list[list] = []  # [first, last, host]
    for rank, host in where:
        if runs and runs[-1][1] == rank - 1 and runs[-1][2] == host:
            runs[-1][1] = rank
        else:
            runs.append([rank, rank, host])
    text = ", ".join(f"{a}{f'-{b}' if b != a else ''} (host {host})" for a, b, host in runs)
    return f"rank{'s' * (len(where) > 1)} {text}"


_GLOO: list = []  # [(default group, its gloo twin)]: made once per default group


def _object_group():
    """The group the exchange runs on: the default one under gloo, else a gloo group over every rank."""
    if dist.get_backend() == "gloo":
        return None
    default = dist.group.WORLD
    if not _GLOO or _GLOO[0][0] is not default:
        _GLOO[:] = [(default, dist.new_group(backend="gloo"))]
    return _GLOO[0][1]
