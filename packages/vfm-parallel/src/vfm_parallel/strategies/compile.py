"""Per-block ``torch.compile``: each transformer block is compiled on its own (small graphs that
compose with FSDP's per-block hooks and with activation checkpointing)."""

from __future__ import annotations

from typing import Any

from torch import nn
from torch.distributed.tensor import DTensor

from vfm_parallel._modules import blocks_of
from vfm_parallel.strategies import text_buckets as buckets


def _holds_dtensors(block: nn.Module) -> bool:
    return any(isinstance(p, DTensor) for p in block.parameters())


class CompileBlocks:
    """``compile``: ``torch.compile`` each block in place (``module.compile``); options are passed
    to ``torch.compile`` (e.g. ``backend="aot_eager"`` where no C++ compiler is available), except
    ``text_buckets``.

    Blocks holding DTensor parameters (TP, SP) are compiled with ``dynamic=False`` unless the options
    say otherwise: when an input changes shape (captions of another length, another bucket), dynamo
    recompiles with symbolic shapes, and tracing DTensor views with symbolic shapes fails with a
    RecursionError in the backward (torch 2.13). Static graphs recompile per shape instead, so the
    text of each call is padded (masked) to a bucket length first (``text_buckets``: ``"auto"``, the
    default, pads to powers of two when some block compiles static and the plan's
    ``masks_text_padding`` says padded tokens change no output; ``"pow2"`` always; an int pads
    up to a multiple of it, e.g. the text encoder's maximum for one graph; ``"off"`` never)."""

    name = "compile"
    phase = "compile"
    mesh_dims: tuple[str, ...] = ()

    def apply(self, model: nn.Module, mesh: Any, plan: Any, *, text_buckets: str | int = "auto",
              **compile_kwargs: Any) -> nn.Module:
        buckets.check_policy(text_buckets)
        static = False
        for block in blocks_of(model, plan):
            kwargs = compile_kwargs
            if "dynamic" not in kwargs and _holds_dtensors(block):
                kwargs = {**kwargs, "dynamic": False}
            static = static or kwargs.get("dynamic") is False
            block.compile(**kwargs)
        if text_buckets == "auto":  # only where padding changes no output (the plan says so)
            text_buckets = "pow2" if static and getattr(plan, "masks_text_padding", False) else "off"
        if text_buckets != "off":
            buckets.install(model, text_buckets)
        return model

