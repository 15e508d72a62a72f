"""Per-block ``torch.compile``: each transformer block is compiled on its own (small graphs that
compose with FSDP's per-block hooks and with activation checkpointing)."""

from __future__ import annotations

from typing import Any

from torch import nn
from torch.distributed.tensor import DTensor

from vfm_parallel._modules import blocks_of


def _holds_dtensors(block: nn.Module) -> bool:
    return any(isinstance(p, DTensor) for p in block.parameters())


class CompileBlocks:
    """``compile``: ``torch.compile`` each block in place (``module.compile``); options are passed
    to ``torch.compile`` (e.g. ``backend="aot_eager"`` where no C++ compiler is available).

    Blocks holding DTensor parameters (TP, SP) are compiled with ``dynamic=False`` unless the options
    say otherwise: when an input changes shape (captions of another length, another bucket), dynamo
    recompiles with symbolic shapes, and tracing DTensor views with symbolic shapes fails with a
    RecursionError in the backward (torch 2.13). Static graphs recompile per shape instead."""

    name = "compile"
    phase = "compile"
    mesh_dims: tuple[str, ...] = ()

    def apply(self, model: nn.Module, mesh: Any, plan: Any, **compile_kwargs: Any) -> nn.Module:
        for block in blocks_of(model, plan):
            kwargs = compile_kwargs
            if "dynamic" not in kwargs and _holds_dtensors(block):
                kwargs = {**kwargs, "dynamic": False}
            block.compile(**kwargs)
        return model
