"""Pad a batch's text tokens to a few bucket lengths (masked), so blocks compiled with static shapes
compile once per bucket instead of once per caption length.

Blocks holding DTensor parameters (TP, SP) compile with ``dynamic=False`` (see ``compile.py``), and
every new text length L then recompiled them; after ``torch._dynamo.config.recompile_limit`` lengths
dynamo gave up and ran them eagerly. Padded keys are masked out of the cross-attention
(``text_mask`` False; docs/contracts.md section 1), so the outputs do not change: ``compile``'s
``"auto"`` pads only where the plan says so (``masks_text_padding``; Wan as trained attends to them).
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import nn

#: Power-of-two buckets start here: captions of 1 to 8 tokens share one graph.
SMALLEST_POW2_BUCKET = 8
POLICIES = ("auto", "pow2", "off")


def check_policy(policy: Any) -> None:
    """``policy`` is one of :data:`POLICIES` or a positive int (pad up to a multiple of it)."""
    if isinstance(policy, bool) or not (policy in POLICIES or (isinstance(policy, int) and policy > 0)):
        raise ValueError(f"compile option text_buckets must be one of {', '.join(map(repr, POLICIES))} or a positive "
                         f"integer (pad the text length up to a multiple of it); got {policy!r}")


def bucket_length(length: int, policy: str | int) -> int:
    """The padded length of ``length`` text tokens: the next power of two (at least
    :data:`SMALLEST_POW2_BUCKET`) for ``"pow2"``, the next multiple of ``policy`` for an int."""
    if policy == "pow2":
        return max(SMALLEST_POW2_BUCKET, 1 << max(length - 1, 0).bit_length())
    return -(-length // policy) * policy


def pad_text(cond: Mapping[str, Any], policy: str | int) -> Mapping[str, Any]:
    """``cond`` with ``text`` (B, L, D) zero-padded to its bucket length and ``text_mask`` (B, L)
    padded with False (made all True first when absent, so every batch reaches the blocks in the
    same form). Other conditioning, and a cond without 3-D ``text``, pass unchanged."""
    text = cond.get("text")
    if not isinstance(text, torch.Tensor) or text.dim() != 3:
        return cond
    length = text.shape[1]
    pad = bucket_length(length, policy) - length
    mask = cond.get("text_mask")
    if mask is None:
        mask = torch.ones(text.shape[:2], dtype=torch.bool, device=text.device)
    elif pad == 0:
        return cond
    return {**cond, "text": F.pad(text, (0, 0, 0, pad)), "text_mask": F.pad(mask, (0, pad), value=False)}


def _pad_inputs(policy: str | int):
    def hook(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        if len(args) >= 3 and isinstance(args[2], Mapping):  # model(x, t, cond)
            return (*args[:2], pad_text(args[2], policy), *args[3:]), kwargs
        if isinstance(kwargs.get("cond"), Mapping):  # model(x, t, cond=cond)
            return args, {**kwargs, "cond": pad_text(kwargs["cond"], policy)}
        if "text" in kwargs:  # a pipeline stage takes cond's entries as keyword arguments
            return args, dict(pad_text(kwargs, policy))
        return args, kwargs

    return hook


def install(model: nn.Module, policy: str | int) -> None:
    """Pad the text of every call of ``model`` (the root, whose blocks are compiled: the hook runs
    eagerly, outside the compiled graphs, so they see bucket lengths only)."""
    model.register_forward_pre_hook(_pad_inputs(policy), with_kwargs=True)
