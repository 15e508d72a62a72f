"""vfm_parallel.preflight: the ranks of a job agree whether it may start, in real gloo processes."""

from __future__ import annotations

import socket

import pytest

from tests.cli.two_nodes import needs_host_names
from tests.gloo import spawn
from vfm_parallel.preflight import PreflightError, agree, checked_together


def _agree(rank: int, world: int, failing: dict) -> tuple[str, str] | None:
    """What agree() returns on this rank where the ranks in ``failing`` failed with their reason."""
    failure = ValueError(failing[rank]) if rank in failing else None
    agreed = agree(failure)
    if agreed is None:
        return None
    return type(agreed).__name__, str(agreed)


def test_every_rank_gets_the_same_error_naming_the_one_rank_that_failed():
    results = spawn(_agree, 3, {1: "data.blend: /x/blend.yaml does not exist"})
    host = socket.gethostname()
    expected = ("PreflightError", f"rank 1 (host {host}): data.blend: /x/blend.yaml does not exist (every rank of "
                                  "the job stopped for it before it began)")
    assert results == [expected] * 3


def test_ranks_that_failed_alike_are_named_together_and_other_reasons_apart():
    results = spawn(_agree, 4, {1: "no shards", 2: "no shards", 3: "locked"})
    host = socket.gethostname()
    assert results == [("PreflightError", f"ranks 1-2 (host {host}): no shards; rank 3 (host {host}): locked (every "
                                           "rank of the job stopped for them before it began)")] * 4


def test_every_rank_failing_alike_keeps_its_own_error():
    # a bad config fails every rank the same way: each says it as one process would
    assert spawn(_agree, 2, {0: "bad key", 1: "bad key"}) == [("ValueError", "bad key")] * 2


def test_no_failure_lets_every_rank_go_on():
    assert spawn(_agree, 2, {}) == [None, None]


def _together(rank: int, world: int) -> str:
    try:
        with checked_together():
            if rank == 0:
                raise KeyError("model.init_from: no such file")
    except PreflightError as exc:
        own = exc.__cause__
        return f"{str(exc).split(' (every')[0]} | cause {type(own).__name__ if own else None}"
    return "went on"


def test_work_that_fails_on_one_rank_stops_the_ranks_whose_work_passed():
    host = socket.gethostname()
    assert spawn(_together, 2) == [f"rank 0 (host {host}): model.init_from: no such file | cause KeyError",
                                   f"rank 0 (host {host}): model.init_from: no such file | cause None"]


def test_one_process_gets_its_own_error_and_starts_no_process_group():
    import torch.distributed as dist

    failure = ValueError("bad")
    assert agree(failure, "cpu") is failure and agree(None, "cpu") is None
    with pytest.raises(KeyError):
        with checked_together("cpu"):
            raise KeyError("x")
    assert not dist.is_initialized()


def _take_over_on_a_full_disk(rank: int, world: int, folder: str) -> str:
    """Rank 1 runs on node-b, where the run that left ``folder``'s lock ran and has ended; rank 0 takes the
    lock over, but its file system refuses the write (no file may grow: a full disk, RLIMIT_FSIZE here)."""
    import ctypes
    import os
    import resource

    from vfm_parallel.trainer.run_folder import RunFolder

    os.environ["LOCAL_WORLD_SIZE"] = "1"  # one rank per node: the lock's host may be one of this job's
    if rank == 1:  # a host of its own (a UTS namespace), named as the lock's holder
        assert ctypes.CDLL(None, use_errno=True).unshare(0x04000000) == 0  # CLONE_NEWUTS
        socket.sethostname("node-b")
    folder_lock = RunFolder(folder).__enter__()
    if rank == 0:
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    try:
        folder_lock.settle()
    except Exception as exc:
        own = exc.__cause__
        return f"{type(exc).__name__}: {str(exc).split(' (every')[0]} | cause {type(own).__name__ if own else None}"
    finally:
        folder_lock.__exit__(None, None, None)
    return "went on"


@needs_host_names
def test_a_takeover_the_file_system_refuses_on_rank_0_stops_every_rank_naming_why(tmp_path):
    # rank 0 raised the OSError of its takeover alone, and the other ranks waited for it in a broadcast
    # (under NCCL until the watchdog; in a torchrun job on gloo they ended saying only that rank 0 was lost)
    import subprocess
    import time

    from vfm_plugins import LOCK_NAME, LockHolder

    gone = subprocess.Popen(["true"])
    gone.wait()
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / LOCK_NAME).write_text(LockHolder(gone.pid, "node-b", "2026-01-01T00:00:00+0000", "vfm train").dumps())
    t0 = time.monotonic()
    results = spawn(_take_over_on_a_full_disk, 2, str(folder), timeout=30)
    assert time.monotonic() - t0 < 30
    why = f"rank 0 (host {socket.gethostname()}): [Errno 27] File too large"
    assert results == [f"PreflightError: {why} | cause OSError", f"PreflightError: {why} | cause None"]
