"""Micro-batches as the trainer sees them, and the loss of one.

Two layouts (the loader adapter in ``vfm_cli.recipe.loaders`` produces them; nothing here imports a data
or model package):

- dense: ``{"x0": (B, C, T, H, W), "cond": {...}}``, samples of one shape stacked;
- packed: ``{"x0s": [N x (C, T_i, H_i, W_i)], "cond": {... batch N}, "num_tokens": int}``, samples of
  different shapes that the model runs as one THD sequence (``model.forward_packed``, through the
  formulation's ``loss_packed``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch


def to_device(value: Any, device: torch.device) -> Any:
    """Tensors (also inside dicts and lists) moved to ``device``; anything else as it is.

    Onto CUDA from ordinary host memory a copy is synchronous: the host would wait for every kernel
    queued before it at each micro-step, and could no longer run ahead of the GPU. So host tensors
    are pinned first (a host-side copy) and sent asynchronously; torch keeps the pinned buffer alive
    until its copy is done."""
    if isinstance(value, torch.Tensor):
        if torch.device(device).type == "cuda" and value.device.type == "cpu":
            return value.pin_memory().to(device, non_blocking=True)
        return value.to(device)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    return value


def batch_size(batch: dict[str, Any]) -> int:
    """Samples in a micro-batch (dense or packed)."""
    return len(batch["x0s"]) if "x0s" in batch else int(batch["x0"].shape[0])


#: ``null_cond(cond, drop)``: ``cond`` with the samples where ``drop`` (B,) bool is True replaced
#: by the model's null condition (built by whoever knows the model: ``vfm_cli.recipe.export``).
NullCond = Callable[[dict, torch.Tensor], dict]


def drop_conditions(batch: dict[str, Any], null_cond: NullCond | None, p: float,
                    generator: torch.Generator) -> dict[str, Any]:
    """Condition dropout: the batch with each sample's condition replaced by the null condition
    with probability ``p``, drawn from ``generator`` (the ``cond_dropout`` stream). Unchanged when
    ``p`` is 0 or the model has no null (unconditional)."""
    if p <= 0 or null_cond is None:
        return batch
    drop = torch.rand(batch_size(batch), generator=generator, device=generator.device) < p
    return {**batch, "cond": null_cond(batch["cond"], drop)}


def micro_loss(formulation: Any, model: torch.nn.Module, batch: dict[str, Any], gen_t: torch.Generator,
               gen_n: torch.Generator | None, noise: torch.Tensor | None = None) -> torch.Tensor:
    """The formulation's loss of one micro-batch (already on the model's device); scalar.

    The noise comes from ``gen_n``, or is ``noise`` (dense batches; then ``gen_n`` is None).
    Packed: every sample counts once in the mean, whatever its token count (``loss_packed``).
    """
    if "x0s" in batch:
        return formulation.loss_packed(model, batch["x0s"], batch["cond"], gen_t, gen_n)
    if noise is not None:
        return formulation.loss(model, batch["x0"], batch["cond"], gen_t, noise=noise)
    return formulation.loss(model, batch["x0"], batch["cond"], gen_t, gen_n)


def count_tokens(batch: dict[str, Any], patch: Sequence[int]) -> int:
    """Real (non-padding) patch tokens of a micro-batch for a (pt, ph, pw) patch."""
    if "num_tokens" in batch:
        return int(batch["num_tokens"])
    pt, ph, pw = patch
    shapes = [x.shape for x in batch["x0s"]] if "x0s" in batch else [batch["x0"].shape[1:]] * batch["x0"].shape[0]
    return sum((t // pt) * (h // ph) * (w // pw) for _, t, h, w in shapes)


def unpatchify(tokens: torch.Tensor, grid: Sequence[int], channels: int, patch: Sequence[int]) -> torch.Tensor:
    """(T'*H'*W', C*pt*ph*pw) t-major tokens, each the patch flattened as (C, pt, ph, pw)
    -> the latent (C, T'*pt, H'*ph, W'*pw)."""
    t, h, w = (int(g) for g in grid)
    pt, ph, pw = (int(p) for p in patch)
    if tokens.shape != (t * h * w, channels * pt * ph * pw):
        raise ValueError(f"tokens of shape {tuple(tokens.shape)} do not fit grid {(t, h, w)} x patch "
                         f"{(pt, ph, pw)} x {channels} channels = ({t * h * w}, {channels * pt * ph * pw})")
    x = tokens.reshape(t, h, w, channels, pt, ph, pw).permute(3, 0, 4, 1, 5, 2, 6)  # (C, T', pt, H', ph, W', pw)
    return x.reshape(channels, t * pt, h * ph, w * pw)


def unpack(patches: torch.Tensor, seq_ids: torch.Tensor, grids: Sequence[Sequence[int]], channels: int,
           patch: Sequence[int]) -> list[torch.Tensor]:
    """The samples of a packed batch as latents: ``patches`` (B, S, C*pt*ph*pw) padded packs,
    ``seq_ids`` (B, S) the sample index of each token (-1 = padding), ``grids`` one per sample."""
    flat, ids = patches.reshape(-1, patches.shape[-1]), seq_ids.reshape(-1)
    return [unpatchify(flat[ids == i], grid, channels, patch) for i, grid in enumerate(grids)]
