"""The built-in vfm-parallel plugin: registers through the same hooks as any third-party plugin."""

from __future__ import annotations

from vfm_parallel.hookspecs import Register
from vfm_parallel.plugins import hookimpl

_S = "vfm_parallel.strategies"


@hookimpl
def vfm_parallel_register_strategies(register: Register) -> None:
    """Built-in strategies (context parallelism registers from ``vfm_parallel.cp.plugin``)."""
    register("ddp", f"{_S}.data_parallel:DistributedDataParallel", description="DistributedDataParallel over dp x cp")
    register("fsdp", f"{_S}.data_parallel:fsdp", description="FSDP2 fully_shard per block then root, over dp_shard x cp")
    register("hsdp", f"{_S}.data_parallel:hsdp", description="FSDP2 replicate over dp_replicate x shard over dp_shard x cp")
    register("tp", f"{_S}.tensor_parallel:tp", description="tensor parallel DTensor plan from the family's plan.tp")
    register("sp", f"{_S}.tensor_parallel:sp", description="tensor parallel + sequence parallel in norm/residual regions")
    register("pp", f"{_S}.pipeline:PipelineParallel", description="torch.distributed.pipelining GPipe / 1F1B, duplicated conditioning")
    register("ac", f"{_S}.checkpointing:ActivationCheckpointing", description="activation checkpointing per block, full or selective")
    register("compile", f"{_S}.compile:CompileBlocks", description="torch.compile per block")
