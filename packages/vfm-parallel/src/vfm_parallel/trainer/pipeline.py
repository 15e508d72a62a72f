"""Pipeline-parallel training pieces: the last stage's loss, one micro-batch through the
schedule, and the stage's parameters under their single-process names.

A pipeline schedule runs the network itself, so the formulation hands over its loss cut where the
network sits (``training_pieces``: network input, network time, target, weight; docs/contracts.md
section 2) and the schedule's loss function computes the weighted MSE on the last stage. Every PP
rank draws the same timestep and noise (seed table 3: same across PP), so every stage sees the
same batch.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def pack_target(target: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """(B, 2, C, T, H, W): target and its broadcast weight in one tensor, because the schedule
    splits one ``target`` tensor into microbatches along dim 0."""
    return torch.stack([target, weight.expand_as(target)], dim=1)


def packed_weighted_mse(output: torch.Tensor, packed: torch.Tensor) -> torch.Tensor:
    """The schedule's loss function: mean(weight * (output - target)^2) over a microbatch (float32).

    A learned-sigma output (twice the target's channels, as vfm_models' ``prediction`` reads it)
    counts with its prediction half; any other channel count is refused rather than broadcast."""
    target, weight = packed[:, 0], packed[:, 1]
    channels = target.shape[1]
    if output.shape[1] == 2 * channels:
        output = output[:, :channels]
    elif output.shape[1] != channels:
        raise ValueError(f"the last stage's output has {output.shape[1]} channels for a target of {channels}; "
                         f"accepted: {channels}, or {2 * channels} (a learned-sigma output, prediction first)")
    return (weight * (output.to(torch.float32) - target) ** 2).mean()


def pipeline_micro_step(pm: Any, params: list[torch.Tensor], pieces: Any, cond: dict) -> torch.Tensor | None:
    """Forward + backward of one micro-batch through the schedule; its loss on the last stage.

    The schedule divides the stage's gradients by its microbatch count after each step; gradients
    of earlier micro-batches (grad_accum > 1) are set aside meanwhile so they are not divided again.
    """
    stash = [p.grad for p in params]
    for p in params:
        p.grad = None
    loss = pm.pipeline_step(pieces.net_x, pieces.t, cond, pack_target(pieces.target, pieces.weight))
    for p, g in zip(params, stash):
        if g is not None:
            p.grad = g if p.grad is None else g + p.grad
    return loss


class OriginalNames(nn.Module):
    """This stage's modules under their single-process names: the stage's blocks renumbered by its
    offset. Checkpoints, EMA keys and exports use it, so the stages' blocks never collide and a PP
    checkpoint loads in any layout. Shares the parameters (no copies)."""

    def __init__(self, model: nn.Module, blocks_path: str, offset: int) -> None:
        super().__init__()
        if "." in blocks_path:
            raise ValueError(f"pipeline training needs the blocks at the model's top level; plan.blocks is {blocks_path!r}")
        for name, child in model.named_children():
            if name == blocks_path:
                child = nn.ModuleDict({str(i + offset): block for i, block in enumerate(child)})
            self.add_module(name, child)
        for name, param in model._parameters.items():
            if param is not None:
                self.register_parameter(name, param)
        for name, buf in model._buffers.items():
            if buf is not None:
                self.register_buffer(name, buf, persistent=name not in model._non_persistent_buffers_set)
