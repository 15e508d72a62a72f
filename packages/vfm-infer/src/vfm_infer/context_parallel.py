"""Context-parallel denoising: the model's token sequence is split over the cp ranks by a
vfm-parallel CP strategy (``cp-ring``, ``cp-ulysses``, ``cp-hybrid``, found in its registry).

The strategy cuts the sequence before the first block, runs every attention core on sequence
shards, and all-gathers the tokens after the last block, so the head (and therefore every
sampler step) sees the whole latent on every rank: the latents are whole before decoding.
"""

from __future__ import annotations

from typing import Any

from torch import nn
from vfm_models.families.plan import parallel_plan_of


def token_count(model: nn.Module, latent_shape: tuple[int, ...]) -> int:
    """Patch tokens of one latent (C', T', H', W') under the model's patch size."""
    _, t, h, w = latent_shape
    pt, ph, pw = model.config.patch
    return (t // pt) * (h // ph) * (w // pw)


def check_tokens(model: nn.Module, latent_shape: tuple[int, ...], cp: int) -> None:
    """The sequence is cut into ``cp`` equal chunks: refuse a token count it does not divide."""
    tokens = token_count(model, latent_shape)
    if tokens % cp:
        raise ValueError(
            f"context parallelism over {cp} ranks needs a token count divisible by {cp}; latent "
            f"{tuple(latent_shape)} with patch {tuple(model.config.patch)} gives {tokens} tokens"
        )


def check_layout(model: nn.Module, latent_shape: tuple[int, ...], cp: int, strategy: str, batch: int) -> None:
    """Everything about ``cp`` ranks running ``strategy`` on ``model`` that would otherwise fail at the
    first denoiser evaluation (or while the strategy is applied), checked before any process group
    starts: the token count, the strategy's own checks (heads over cp for all-to-all) and, for the
    attentions the strategy serves by all-to-all of whole groups (cp-hybrid's spatial and temporal),
    that the groups of a ``batch``-sample forward deal evenly to the ranks. Raises ValueError."""
    check_tokens(model, latent_shape, cp)
    if cp == 1:
        return
    from vfm_parallel.dims import ParallelDims

    chosen, plan = cp_strategy(strategy), parallel_plan_of(model)
    if hasattr(chosen, "check"):  # a plugin's CP strategy may have neither check nor methods
        chosen.check(ParallelDims(cp=cp), plan)
    _, t, h, w = latent_shape
    pt, ph, pw = model.config.patch
    grid = (t // pt, h // ph, w // pw)
    if hasattr(chosen, "check_batch"):
        chosen.check_batch(plan, batch, grid, cp)


def cp_strategy(name: str):
    """The registered context-parallel strategy ``name``; a ValueError naming the context-parallel
    strategies when the name is unknown or names another kind of strategy (e.g. ``fsdp``)."""
    from vfm_parallel.plugins import host
    from vfm_parallel.strategy import get_strategy

    def loads(n: str):
        try:
            return get_strategy(n)
        except Exception:  # noqa: BLE001 - a broken plugin strategy is simply not listed
            return None

    def cp_names() -> str:
        return ", ".join(n for n in sorted(host.names("strategies")) if getattr(loads(n), "phase", None) == "cp")

    try:
        strategy = get_strategy(name)
    except KeyError:
        raise ValueError(f"unknown context-parallel strategy {name!r}; available: {cp_names()}") from None
    if getattr(strategy, "phase", None) != "cp":
        raise ValueError(f"strategy {name!r} is not a context-parallel strategy (phase {strategy.phase!r}); "
                         f"use one of: {cp_names()}")
    return strategy


def context_parallel_model(model: nn.Module, mesh: Any, strategy: str = "cp-ring") -> nn.Module:
    """Apply the registered CP ``strategy`` to ``model`` (in place) over ``mesh``'s ``cp`` dimension."""
    cp = cp_strategy(strategy)
    # Inference: no gradients to average over the cp ranks.
    return cp.apply(model, mesh, parallel_plan_of(model), average_gradients=False)
