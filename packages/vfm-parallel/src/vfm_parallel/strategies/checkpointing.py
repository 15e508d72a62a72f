"""Activation checkpointing per block: ``full`` (recompute each block) or ``selective`` (keep the
outputs of matmuls and attention, recompute the cheap element-wise ops in between).

The block's ``forward`` is wrapped in place rather than with ``checkpoint_wrapper`` so that
parameter names (and therefore checkpoints and gradient-sync lists) do not change.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from vfm_parallel._modules import blocks_of

MODES = ("full", "selective")


def _save_compute_ops():
    ops = [torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default,
           torch.ops.aten._scaled_dot_product_flash_attention.default,
           torch.ops.aten._scaled_dot_product_efficient_attention.default]
    if hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu"):
        ops.append(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default)
    return set(ops)


def _selective_context():
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    save = _save_compute_ops()

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op in save else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


class ActivationCheckpointing:
    """``ac``: options ``mode`` (``"full"`` | ``"selective"``), ``every`` (checkpoint every n-th block
    only; 1 = all) and ``blocks`` (checkpoint only the first n of those, like Megatron's
    ``--recompute-method block --recompute-num-layers n``; 0 = all). Under a pipeline the blocks are
    this stage's (``ac`` applies after the ``pp`` split), so ``blocks`` counts per stage."""

    name = "ac"
    phase = "checkpoint"
    mesh_dims: tuple[str, ...] = ()

    def apply(self, model: nn.Module, mesh: Any, plan: Any, *, mode: str = "full", every: int = 1,
              blocks: int = 0) -> nn.Module:
        if mode not in MODES:
            raise ValueError(f"activation checkpointing mode must be one of {', '.join(MODES)}; got {mode!r}")
        for key, value, least in (("every", every, 1), ("blocks", blocks, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"activation checkpointing {key} must be an int >= {least}; got {value!r}")
        stage_blocks = blocks_of(model, plan)
        chosen = [i for i in range(len(stage_blocks)) if i % every == 0]
        if blocks > len(chosen):
            raise ValueError(f"activation checkpointing blocks = {blocks}, but this model (or pipeline stage) has "
                             f"{len(chosen)} blocks to checkpoint{f' (every {every})' if every > 1 else ''}; "
                             "use 0 (all) or fewer")
        chosen = chosen[:blocks] if blocks else chosen
        for index in chosen:
            stage_blocks[index].forward = _Checkpointed(stage_blocks[index].forward, mode)
        return model


class _Checkpointed:
    """A block's ``forward`` that runs it under ``torch.utils.checkpoint``.

    An object holding the bound ``forward`` rather than a closure over it: ``copy.deepcopy`` of the
    model (an EMA copy) rebinds a held method to the copied block, while a closure would keep calling
    the original block, so the copy would compute with the original's weights."""

    def __init__(self, forward, mode: str):
        functools.update_wrapper(self, forward)
        self.block_forward, self.mode = forward, mode

    def __call__(self, *args, **kwargs):
        extra = {"context_fn": _selective_context} if self.mode == "selective" else {}
        return checkpoint(self.block_forward, *args, use_reentrant=False, **extra, **kwargs)
