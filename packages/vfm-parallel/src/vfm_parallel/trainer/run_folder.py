"""One training job per run folder: rank 0 holds ``train.out_dir``'s lock (:class:`vfm_plugins.FolderLock`).

The folder belongs to the job, not to a rank, so only rank 0 takes the lock; the other ranks write
into it (checkpoint shards) as part of the same job. A second job into the folder fails on every
rank with an error naming rank 0 and the holder, once the process group is up (:meth:`RunFolder.settle`),
so they write nothing; the ranks of a job on several nodes do not wait for a rank 0 that failed alone.
A lock left on another host is the exception (:class:`RunFolder`): on several nodes, the ranks on that
host are asked first.

Every rank writes its part of each checkpoint into the folder and rank 0 reads them all back, so on
several nodes it must be one folder on a filesystem they share: :func:`check_shared_run_folder`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import time
from pathlib import Path

import torch.distributed as dist
from vfm_plugins import FolderLock, FolderLockedError, HeldOnAnotherHostError
from vfm_plugins.parent_watch import pid_exists

from vfm_parallel.preflight import agree
from vfm_parallel.process_group import env_several_nodes, env_world_size


def launch_rank() -> int:
    """This process's rank: the process group's once it is set up, before that the launcher's ``RANK``."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", "0"))


def hold_run_folder(out_dir: str | Path) -> "RunFolder":
    """``with hold_run_folder(out_dir) as folder:`` on rank 0 the run owns the folder; elsewhere nothing.
    Once the process group is up, every rank calls ``folder.settle()``."""
    return RunFolder(out_dir)


class RunFolder:
    """Rank 0's lock on the run folder. A lock left by a run on another host is not refused at once on a
    job of several nodes: that host may be one of this job's (a requeued job whose rank 0 landed on
    another node than the killed run's), and a rank there can tell whether the holder's process
    is gone (:meth:`settle`)."""

    def __init__(self, out_dir: str | Path) -> None:
        self.out_dir = out_dir
        self.lock: FolderLock | None = None
        self.elsewhere: HeldOnAnotherHostError | None = None
        self.refused: Exception | None = None  # rank 0's refusal, told to every rank by settle()

    def __enter__(self) -> "RunFolder":
        if launch_rank() != 0:
            return self
        try:
            self.lock = FolderLock(self.out_dir).acquire()
        except (FolderLockedError, OSError) as exc:
            if isinstance(exc, HeldOnAnotherHostError) and env_several_nodes():
                self.elsewhere = exc  # the ranks on the holder's host are asked in settle()
            elif env_world_size() <= 1:
                raise
            else:  # a live holder (one node: no rank of this job runs on another host's), an unwritable folder:
                self.refused = exc  # the other ranks must not wait for this one in the group's start
        return self

    def __exit__(self, *exc: object) -> None:
        if self.lock is not None:
            self.lock.release()

    def settle(self) -> None:
        """Collective: a lock rank 0 could not take is every rank's error, naming rank 0 and its host
        (:func:`vfm_parallel.preflight.agree`). Where rank 0 found a holder on another host, the ranks on that host say whether
        its process is gone; if one does, rank 0 takes the folder over (a :class:`StaleLockWarning`; a
        takeover that fails is every rank's error as above), else every rank raises rank 0's refusal."""
        if not dist.is_initialized():
            if self.elsewhere is not None:
                raise self.elsewhere
            return
        agreed = agree(self.refused)  # rank 0 refused (a live holder here, an unwritable folder): every rank stops
        if agreed is not None:
            raise agreed
        box = [self.elsewhere]
        dist.broadcast_object_list(box, src=0)
        refusal = box[0]
        if refusal is None:
            return
        holder = refusal.holder
        verdicts: list = [None] * dist.get_world_size()
        dist.all_gather_object(verdicts, socket.gethostname() == holder.host and not pid_exists(holder.pid))
        if not any(verdicts):
            raise refusal
        failure = None
        if dist.get_rank() == 0:
            try:
                self.lock = FolderLock(self.out_dir, gone=holder).acquire()
            except Exception as exc:  # another run took it meanwhile, or a write refused (a full disk): rank 0's
                failure = exc  # alone, which the other ranks must hear of rather than wait for
        agreed = agree(failure)
        if agreed is not None:
            raise agreed


# how long a rank looks for rank 0's probe file before calling the folder unshared: a shared
# filesystem may show another host's new file a moment late (only a refused run waits this long)
SHARED_PROBE_WAIT_S = 5.0


def check_shared_run_folder(out_dir: str | Path) -> None:
    """Every rank sees ``out_dir`` as the folder rank 0 holds, or a :class:`ConfigError` on every rank
    naming the ranks (and hosts) that do not: node-local scratch on a multi-node job, or nodes given
    different folders. Found here, before the first step, instead of at the first checkpoint (hours
    in), where rank 0 could not read back what the other nodes wrote. Rank 0 writes a file of a new
    name (never looked up before, so no filesystem cache answers for it), every rank looks for it.
    Collective: every rank calls it once the process group is up."""
    from vfm_parallel.trainer.config import ConfigError

    if not dist.is_initialized() or dist.get_world_size() == 1:
        return
    rank, folder = dist.get_rank(), Path(out_dir)
    box = [f".vfm-shared-{secrets.token_hex(8)}" if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    probe = folder / box[0]
    written = None
    try:
        if rank == 0:
            try:
                probe.write_text(socket.gethostname())
            except OSError as exc:
                written = f"{type(exc).__name__}: {exc}"
        dist.barrier()
        deadline = time.monotonic() + SHARED_PROBE_WAIT_S
        while not (seen := probe.is_file()) and written is None and time.monotonic() < deadline:
            time.sleep(0.1)
        everyone: list = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, (seen, socket.gethostname(), written))
    finally:  # also when a collective fails (a rank lost): the run folder keeps no probe
        if rank == 0:
            with contextlib.suppress(OSError):
                probe.unlink()
    if everyone[0][2] is not None:
        raise ConfigError("train.out_dir", f"rank 0 cannot write into {folder}: {everyone[0][2]}")
    unseen = [f"{r} (host {host})" for r, (found, host, _) in enumerate(everyone) if not found]
    if unseen:
        raise ConfigError("train.out_dir", (
            f"{folder} is not one folder shared by every rank: rank 0 (host {everyone[0][1]}) wrote a file there that "
            f"rank(s) {', '.join(unseen)} do not see. Every rank writes its part of each checkpoint into it and rank 0 "
            f"reads them back, so on several nodes give train.out_dir on a filesystem every node mounts at the same "
            f"path (NFS, Lustre, ...), not node-local scratch, and the same value on every node"))
