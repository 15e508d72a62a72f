"""Data parallelism: DDP, FSDP2 (``fully_shard``) and HSDP (replicate x shard).

Context-parallel ranks hold the same weights and see different tokens of the same samples, so every
data-parallel strategy spans CP too: gradients are averaged over ``dp x cp`` (each rank's loss is
the mean over its own tokens, so the average is the global mean).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from vfm_parallel._modules import blocks_of
from vfm_parallel.dims import flat_mesh, hsdp_mesh

_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
           "float16": torch.float16, "fp16": torch.float16}


def _dtype(value):
    if value is None or isinstance(value, torch.dtype):
        return value
    if value not in _DTYPES:
        raise ValueError(f"unknown dtype {value!r}; accepted: {', '.join(_DTYPES)}")
    return _DTYPES[value]


class FullyShard:
    """``fsdp`` (shard over ``dp_shard x cp``) and ``hsdp`` (also replicate over ``dp_replicate``).

    ``fully_shard`` wraps each block, then the root; the last block keeps its parameters gathered
    after forward (``reshard_after_forward=False``) because backward needs them straight away.
    Options: ``param_dtype``/``reduce_dtype`` (mixed-precision policy, e.g. ``"bf16"``/``"fp32"``),
    ``cpu_offload`` (bool), ``reshard_after_forward`` (bool, the other blocks; default True).
    """

    phase = "dp"

    def __init__(self, hybrid: bool = False) -> None:
        self.hybrid = hybrid
        self.name = "hsdp" if hybrid else "fsdp"
        self.mesh_dims = ("dp_replicate", "dp_shard", "cp") if hybrid else ("dp_shard", "cp")

    def apply(self, model: nn.Module, mesh: Any, plan: Any, *, param_dtype=None, reduce_dtype=None,
              cpu_offload: bool = False, reshard_after_forward: bool = True) -> nn.Module:
        from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

        if not self.hybrid and mesh["dp_replicate"].size() > 1:
            raise ValueError(f"fsdp shards over dp_shard x cp; dp_replicate={mesh['dp_replicate'].size()} needs hsdp")
        dp_mesh = hsdp_mesh(mesh) if self.hybrid else flat_mesh(mesh, "dp_shard_cp")
        kwargs: dict[str, Any] = {
            "mesh": dp_mesh,
            "mp_policy": MixedPrecisionPolicy(param_dtype=_dtype(param_dtype), reduce_dtype=_dtype(reduce_dtype)),
        }
        if cpu_offload:
            kwargs["offload_policy"] = CPUOffloadPolicy()
        blocks = blocks_of(model, plan)
        for index, block in enumerate(blocks):
            last = index == len(blocks) - 1
            fully_shard(block, reshard_after_forward=reshard_after_forward and not last, **kwargs)
        fully_shard(model, reshard_after_forward=reshard_after_forward, **kwargs)
        return model


class DistributedDataParallel:
    """``ddp``: replicate the whole model over ``dp x cp`` with ``DistributedDataParallel``."""

    name = "ddp"
    phase = "dp"
    mesh_dims = ("dp_replicate", "dp_shard", "cp")

    def check(self, dims: Any, plan: Any = None) -> None:
        """Before anything starts (``vfm_parallel.check_strategies``): DDP takes no TP."""
        from vfm_parallel.dims import LayoutError

        # fsdp takes no dp_replicate: name the one strategy that runs this layout
        instead = (f"hsdp (it replicates over dp_replicate={dims.dp_replicate} as ddp does)" if dims.dp_replicate > 1
                   else "fsdp or hsdp")
        if dims.tp > 1:
            raise LayoutError(f"ddp does not compose with tp={dims.tp} (DTensor parameters); with tp use {instead}")
        if dims.pp > 1:  # DDP's reducer takes one backward per forward; a schedule runs one per microbatch
            raise LayoutError(f"ddp does not run under the pipeline schedule (pp={dims.pp}: a backward per "
                              f"microbatch); with pp use {instead}")

    def apply(self, model: nn.Module, mesh: Any, plan: Any, **ddp_kwargs: Any) -> nn.Module:
        from torch.nn.parallel import DistributedDataParallel as DDP

        if mesh["tp"].size() > 1:
            raise ValueError(f"ddp does not compose with tp={mesh['tp'].size()} (DTensor parameters); use fsdp or hsdp")
        return DDP(model, process_group=flat_mesh(mesh, "dp_cp").get_group(), **ddp_kwargs)


def fsdp() -> FullyShard:
    return FullyShard(hybrid=False)


def hsdp() -> FullyShard:
    return FullyShard(hybrid=True)
