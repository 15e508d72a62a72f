"""Registers the context-parallel strategies through the vfm_parallel hook, like any plugin."""

from __future__ import annotations

from vfm_parallel.hookspecs import Register
from vfm_parallel.plugins import hookimpl


@hookimpl
def vfm_parallel_register_strategies(register: Register) -> None:
    """Built-in context-parallel strategies (lazy targets: torch.distributed loads on first use)."""
    register("cp-ring", "vfm_parallel.cp.strategy:RING", description="CP: ring attention over P2P for all self-attention")
    register("cp-ulysses", "vfm_parallel.cp.strategy:ULYSSES", description="CP: all-to-all (Ulysses) head/sequence exchange")
    register("cp-hybrid", "vfm_parallel.cp.strategy:HYBRID", description="CP for ST-DiT: A2A + local spatial/temporal, ring for full")
