"""vfm-parallel: 4D parallelism (TP, SP, PP, CP, FSDP) on PyTorch-native distributed, RNG streams, checkpoints, the trainer."""

from __future__ import annotations

import importlib
from typing import Any

from vfm_parallel.plugins import hookimpl, host

__version__ = "0.1.0"

# Importing torch is slow; `vfm --help` and `vfm plugins` import this package only for its plugin
# host, so the torch-using names are resolved on first access.
_LAZY = {
    "MESH_DIMS": "vfm_parallel.dims", "LayoutError": "vfm_parallel.dims", "ParallelDims": "vfm_parallel.dims",
    "HardwareError": "vfm_parallel.dims",
    "ParallelModel": "vfm_parallel.parallel_model", "parallelize": "vfm_parallel.parallel_model",
    "PHASES": "vfm_parallel.strategy", "Strategy": "vfm_parallel.strategy", "get_strategy": "vfm_parallel.strategy",
}
__all__ = ["hookimpl", "host", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'vfm_parallel' has no attribute {name!r}")


def __dir__() -> list[str]:
    # the lazy names too, so that help() and tab completion show them
    return sorted({*globals(), *_LAZY})
