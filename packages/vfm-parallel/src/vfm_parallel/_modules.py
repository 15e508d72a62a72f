"""Small helpers to reach modules of a family model by the dotted paths of its ``ParallelPlan``."""

from __future__ import annotations

from torch import nn


def submodule(root: nn.Module, path: str) -> nn.Module:
    """``root.<path>`` for a dotted path; a missing part names the path and what exists there."""
    module = root
    for part in path.split("."):
        if not hasattr(module, part):
            children = ", ".join(name for name, _ in module.named_children()) or "(none)"
            raise AttributeError(f"plan path {path!r}: {type(module).__name__} has no {part!r}; children: {children}")
        module = getattr(module, part)
    return module


def blocks_of(model: nn.Module, plan) -> nn.ModuleList:
    """The ``nn.ModuleList`` of transformer blocks at ``plan.blocks``."""
    blocks = submodule(model, plan.blocks)
    if not isinstance(blocks, nn.ModuleList):
        raise TypeError(f"plan.blocks {plan.blocks!r} must be an nn.ModuleList, got {type(blocks).__name__}")
    return blocks


def parent_path(path: str) -> str:
    """``"attn.q"`` -> ``"attn"``; ``"q"`` -> ``""`` (the block itself)."""
    return path.rpartition(".")[0]
