"""vfm's exceptions with fields of their own survive pickling (Ray workers, spawned loader workers
and torchrun ranks hand them over pickled): the same type, message and fields on the other side,
not a TypeError from a constructor called with the message alone."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from vfm_curator.stages.caption import CaptionError
from vfm_data.trust import DatasetNotFoundError, UntrustedDatasetError
from vfm_parallel.dims import HardwareError
from vfm_parallel.trainer.config.reading import ConfigFileError
from vfm_parallel.trainer.config.sections import ConfigError
from vfm_plugins.folder_lock import FolderLockedError, LockHolder

HOLDER = LockHolder(pid=7, host="node-1", started="2026-11-23T00:00:00+0000", command="vfm train x.toml")
ERRORS = [
    (ConfigError("parallel.tp", "must divide num_heads = 6"), ["key", "reason"]),
    (ConfigFileError("no config file at x.toml; accepted: a TOML training config file"), ["key", "reason"]),
    (UntrustedDatasetError(Path("/d/.nv-meta/dataset.yaml"), "__module__", "not accepted"), ["file", "key", "reason"]),
    (DatasetNotFoundError(Path("/nowhere"), "blend.yaml"), ["path", "named_by"]),
    (FolderLockedError(Path("/run"), Path("/run/.vfm-lock"), HOLDER, "; why"), ["folder", "path", "holder", "why"]),
    (FolderLockedError(Path("/run"), Path("/run/.vfm-lock"), None), ["holder"]),
    (HardwareError("megatron-sp: needs CUDA", subject="megatron-sp", needs="CUDA"), ["subject", "needs"]),
    (CaptionError("2 of 3 clips uncaptioned", cause="timeout", kind="caption-timeout"), ["cause", "kind"]),
]


@pytest.mark.parametrize("error, fields", ERRORS, ids=[type(e).__name__ for e, _ in ERRORS])
def test_an_error_pickles_to_the_same_type_message_and_fields(error, fields):
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error) and str(back) == str(error)
    for name in fields:
        assert getattr(back, name) == getattr(error, name)
