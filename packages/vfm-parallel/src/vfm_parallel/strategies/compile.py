"""Per-block ``torch.compile``: each transformer block is compiled on its own (small graphs that
compose with FSDP's per-block hooks and with activation checkpointing)."""

from __future__ import annotations

from typing import Any

from torch import nn

from vfm_parallel._modules import blocks_of


class CompileBlocks:
    """``compile``: ``torch.compile`` each block in place (``module.compile``); options are passed
    to ``torch.compile`` (e.g. ``backend="aot_eager"`` where no C++ compiler is available)."""

    name = "compile"
    phase = "compile"
    mesh_dims: tuple[str, ...] = ()

    def apply(self, model: nn.Module, mesh: Any, plan: Any, **compile_kwargs: Any) -> nn.Module:
        for block in blocks_of(model, plan):
            block.compile(**compile_kwargs)
        return model
