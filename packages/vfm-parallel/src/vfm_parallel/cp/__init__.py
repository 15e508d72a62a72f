"""Context parallelism: ring (P2P) and all-to-all (Ulysses) attention, and the hybrid for ST-DiT."""

from __future__ import annotations

import importlib
from typing import Any

# Lazy, like the package root: registering the CP strategies (lazy targets in vfm_parallel's
# plugins.toml) must not import torch, so that listing plugins stays cheap.
_LAZY = {
    "HYBRID": "vfm_parallel.cp.strategy", "RING": "vfm_parallel.cp.strategy", "ULYSSES": "vfm_parallel.cp.strategy",
    "ContextParallel": "vfm_parallel.cp.strategy", "ContextParallelCore": "vfm_parallel.cp.cores",
    "group_attention": "vfm_parallel.cp.groups", "ring_attention": "vfm_parallel.cp.ring",
    "ulysses_attention": "vfm_parallel.cp.ulysses",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'vfm_parallel.cp' has no attribute {name!r}")
