"""Classifier-free guidance: pred = uncond + scale * (cond - uncond), for D(x; sigma) or velocities.

Both predictions are linear in the network output, so the same combination is right for EDM's
denoised estimate and for a flow velocity. Two ways to get both branches each step:

- :func:`classifier_free`: one forward pass on the batch [cond; uncond] (one process);
- :func:`cfg_parallel`: the conditional branch on one rank and the unconditional on the other of a
  two-rank group, all-gathered and combined identically on both ranks, so each rank holds the same
  guided prediction (half the per-rank compute at the price of one all-gather per evaluation).
"""

from __future__ import annotations

from typing import Callable, Mapping

import torch

from vfm_infer.samplers.base import Denoiser

#: ``net(x, level, cond) -> prediction``: a formulation's ``denoise`` bound to a model.
ConditionalDenoiser = Callable[[torch.Tensor, torch.Tensor, Mapping[str, torch.Tensor]], torch.Tensor]


def default_scale(meta: Mapping) -> float:
    """The guidance scale to use when none is given: the export's ``guidance`` (training writes the
    formulation's default there when condition dropout trained the null condition, else 1). An
    export without it predates condition dropout, so its null was never trained: 1 (no guidance)."""
    scale = meta.get("guidance")
    return 1.0 if scale is None else float(scale)


def combine(cond: torch.Tensor, uncond: torch.Tensor, scale: float) -> torch.Tensor:
    """uncond + scale * (cond - uncond); scale 1 is the conditional prediction, 0 the unconditional."""
    return uncond + scale * (cond - uncond)


def concat_conditions(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The batch [a; b] of two condition dicts with the same keys.

    Sequence-shaped entries (text (B, L, D), text_mask (B, L)) of different lengths are padded with
    zeros / False to the longer one, so an empty negative prompt batches with a long prompt. Texts
    given without masks get them here (True for every given token), so the padding is masked too.
    """
    if set(a) != set(b):
        raise ValueError(f"conditional and unconditional inputs need the same keys; got {sorted(a)} and {sorted(b)}")
    if _text_lengths_differ(a, b) and "text_mask" not in a:
        # zeros without a mask were attended as tokens by every family
        a, b = ({**c, "text_mask": torch.ones(c["text"].shape[:2], dtype=torch.bool, device=c["text"].device)}
                for c in (a, b))
    out = {}
    for key in a:
        x, y = a[key], b[key]
        if x.dim() >= 2 and y.dim() >= 2 and x.shape[1] != y.shape[1]:
            length = max(x.shape[1], y.shape[1])
            x, y = (_pad_dim1(t, length) for t in (x, y))
        out[key] = torch.cat([x, y])
    return out


def _text_lengths_differ(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> bool:
    x, y = a.get("text"), b.get("text")
    return x is not None and y is not None and x.dim() >= 2 and y.dim() >= 2 and x.shape[1] != y.shape[1]


def _batch(condition: Mapping[str, torch.Tensor]) -> int | None:
    sizes = {int(v.shape[0]) for v in condition.values() if isinstance(v, torch.Tensor) and v.dim() >= 1}
    return sizes.pop() if len(sizes) == 1 else None


def match_batch(cond: Mapping[str, torch.Tensor], uncond: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``uncond`` for ``cond``'s batch: one unconditional sample (what
    :func:`vfm_models.conditioning.null_condition` gives) is repeated for every prompt; another batch
    size than the prompts' is an error naming both (it failed inside the model, counting the
    concatenated batch: "cond['text'] has 3 samples but t has 4")."""
    want, have = _batch(cond), _batch(uncond)
    if want is None or have is None or want == have:
        return dict(uncond)
    if have == 1:
        return {k: v.expand(want, *v.shape[1:]) for k, v in uncond.items()}
    raise ValueError(f"the conditional inputs hold {want} samples but the unconditional ones {have}; accepted: "
                     f"{want} unconditional samples (one per prompt), or 1 (repeated for every prompt)")


def _pad_dim1(t: torch.Tensor, length: int) -> torch.Tensor:
    pad = t.new_zeros((t.shape[0], length - t.shape[1], *t.shape[2:]))
    return torch.cat([t, pad], dim=1)


def classifier_free(
    net: ConditionalDenoiser, cond: Mapping[str, torch.Tensor], uncond: Mapping[str, torch.Tensor] | None, scale: float,
    *, masks_text_padding: bool = False,
) -> Denoiser:
    """A sampler denoiser with CFG computed in one batched pass; ``scale == 1`` or no ``uncond``
    skips the unconditional branch, ``scale == 0`` the conditional one (its weight is 0). An
    ``uncond`` of batch 1 (the null condition) serves every sample of ``cond``.

    Batching pads the shorter of two texts with masked zeros. ``masks_text_padding`` (the model's
    ``parallel_plan().masks_text_padding``) says those change no output; a model that attends to its
    text padding (Wan as trained, and the default for a model not known to mask) runs the two branches
    as separate passes when their texts differ in length, so the result never depends on batching."""
    if uncond is not None:
        uncond = match_batch(cond, uncond)
    if uncond is None or scale == 1.0:
        return lambda x, level: net(x, level, cond)
    if scale == 0.0:
        return lambda x, level: net(x, level, uncond)
    if not masks_text_padding and _text_lengths_differ(cond, uncond):
        return lambda x, level: combine(net(x, level, cond), net(x, level, uncond), scale)
    both = concat_conditions(cond, uncond)

    def guided(x: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
        out = net(torch.cat([x, x]), torch.cat([level, level]), both)
        c, u = out.chunk(2)
        return combine(c, u, scale)

    return guided


def cfg_parallel(
    net: ConditionalDenoiser,
    cond: Mapping[str, torch.Tensor],
    uncond: Mapping[str, torch.Tensor],
    scale: float,
    group=None,
) -> Denoiser:
    """A sampler denoiser whose two CFG branches run on the two ranks of ``group``.

    Group rank 0 evaluates the conditional branch, rank 1 the unconditional one; every rank returns
    the same combined prediction. An ``uncond`` of batch 1 serves every sample of ``cond``.
    """
    import torch.distributed as dist

    uncond = match_batch(cond, uncond)
    size = dist.get_world_size(group)
    if size != 2:
        raise ValueError(f"CFG-parallel needs a group of exactly 2 ranks (conditional, unconditional); got {size}")
    mine = cond if dist.get_rank(group) == 0 else uncond

    def guided(x: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
        out = net(x, level, mine).contiguous()
        parts = [torch.empty_like(out) for _ in range(2)]
        dist.all_gather(parts, out, group=group)
        return combine(parts[0], parts[1], scale)

    return guided
