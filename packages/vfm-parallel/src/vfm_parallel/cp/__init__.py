"""Context parallelism: ring (P2P) and all-to-all (Ulysses) attention, and the hybrid for ST-DiT."""

from vfm_parallel.cp.cores import ContextParallelCore
from vfm_parallel.cp.groups import group_attention
from vfm_parallel.cp.ring import ring_attention
from vfm_parallel.cp.strategy import HYBRID, RING, ULYSSES, ContextParallel
from vfm_parallel.cp.ulysses import ulysses_attention

__all__ = [
    "HYBRID",
    "RING",
    "ULYSSES",
    "ContextParallel",
    "ContextParallelCore",
    "group_attention",
    "ring_attention",
    "ulysses_attention",
]
