"""Registers the Megatron engine's strategies through the vfm_parallel hook, like any plugin.

The targets are lazy: megatron-core is imported on first ``apply``, so listing or validating
strategies works without the ``megatron`` extra installed.
"""

from __future__ import annotations

from vfm_parallel.hookspecs import Register
from vfm_parallel.plugins import hookimpl

_S = "vfm_parallel.engines.megatron.strategy"


@hookimpl
def vfm_parallel_register_strategies(register: Register) -> None:
    register("megatron-tp", f"{_S}:megatron_tp",
             description="TP with megatron-core Column/RowParallelLinear from plan.tp (extra: megatron)")
    register("megatron-sp", f"{_S}:megatron_sp",
             description="megatron-tp + megatron-core sequence parallelism (sequence-first, CUDA buffers)")
