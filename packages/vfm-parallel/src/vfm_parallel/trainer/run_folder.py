"""One training job per run folder: rank 0 holds ``train.out_dir``'s lock (:class:`vfm_plugins.FolderLock`).

The folder belongs to the job, not to a rank, so only rank 0 takes the lock; the other ranks write
into it (checkpoint shards) as part of the same job. A second job into the folder fails on its
rank 0 with an error naming the holder, before that rank joins the process group; its other ranks
then wait in the rendezvous until torchrun ends them for rank 0's failure, so they write nothing.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import ContextManager

import torch.distributed as dist
from vfm_plugins import FolderLock


def launch_rank() -> int:
    """This process's rank: the process group's once it is set up, before that the launcher's ``RANK``."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", "0"))


def hold_run_folder(out_dir: str | Path) -> ContextManager:
    """``with hold_run_folder(out_dir):`` on rank 0 the run owns the folder; elsewhere nothing."""
    if launch_rank() != 0:
        return contextlib.nullcontext()
    return FolderLock(out_dir)
