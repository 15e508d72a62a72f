"""Exponential moving average of the weights, kept in the same sharding as the parameters."""

from __future__ import annotations

import math

import torch
from torch import nn


def clean_fqn(name: str) -> str:
    """A parameter name without wrapper prefixes (activation checkpointing, torch.compile), so EMA
    keys match the model's state-dict keys whatever wrappers a layout adds."""
    return name.replace("_checkpoint_wrapped_module.", "").replace("_orig_mod.", "")


def warmed_decay(decay: float, t: int | torch.Tensor) -> float | torch.Tensor:
    """The decay of update ``t`` (0-based, counting the updates applied) under warm-up, as diffusers'
    EMAModel: ``min(decay, (1 + t) / (10 + t))``. The ramp starts at 0.1, so the average forgets the
    random initial weights in a few updates whatever ``decay`` is; it reaches 0.999 at update 8990.
    ``t`` a float64 device tensor: the decay stays there (no host sync)."""
    ramp = (1 + t) / (10 + t)
    return ramp.clamp(max=decay) if isinstance(ramp, torch.Tensor) else min(decay, ramp)


def _ramp_updates(decay: float) -> int:
    """How many updates warm-up takes before the ramp reaches ``decay`` (the ramp's decays below it)."""
    if decay <= 0.1:
        return 0
    # (1 + t) / (10 + t) < decay  <=>  t < (10 decay - 1) / (1 - decay); at equality either side is decay
    return math.ceil((10 * decay - 1) / (1 - decay))


def initial_share(decay: float, updates: int, warmup: bool) -> float:
    """The share of the initial weights left in the EMA after ``updates`` updates: the product of
    the decays (each update keeps ``decay`` of the average). Without warm-up ``decay ** updates``;
    with it the ramp's product ``prod_{t<k} (1 + t) / (10 + t) = 1 / C(k + 9, 9)`` over its first
    ``k`` updates, then ``decay`` per update."""
    if not warmup:
        return decay ** updates
    k = min(updates, _ramp_updates(decay))
    return decay ** (updates - k) / math.comb(k + 9, 9)


class EMA:
    """``ema = decay * ema + (1 - decay) * param`` after every optimizer step; with ``warmup`` the
    decay of the update ``t`` is :func:`warmed_decay` (``t`` counts the updates applied: a step the
    optimizer skipped does not advance it). ``updates`` is that count, which a checkpoint keeps.

    The shadow tensors are detached clones of the parameters, so under FSDP/TP they are DTensors
    with the same placements and each rank updates only its own shard (no communication).
    """

    def __init__(self, model: nn.Module, decay: float, *, warmup: bool = True) -> None:
        self.decay, self.warmup = decay, warmup
        # A host int where the trainer decides a skip on the host; a 0-dim device tensor once a step
        # gated on the device has counted (``keep``), so counting costs no host sync either.
        self.updates: int | torch.Tensor = 0
        self.shadow: dict[str, torch.Tensor] = {
            clean_fqn(name): p.detach().clone() for name, p in model.named_parameters()
        }

    def _decay_now(self, keep: torch.Tensor | None) -> float | torch.Tensor:
        if not self.warmup:
            return self.decay
        t = self.updates
        # A step gated on the device takes its decay there: from the count that lives there, or a fill
        # of the host count (a kernel, not a blocking host-to-device copy), so no step syncs the host.
        if isinstance(t, torch.Tensor):
            t = t.to(torch.float64)
        elif keep is not None:
            t = keep.new_full((), t, dtype=torch.float64)
        return warmed_decay(self.decay, t)

    @torch.no_grad()
    def update(self, model: nn.Module, keep: torch.Tensor | None = None) -> None:
        """One blend; ``keep`` (a 0-dim device tensor, 1 or 0) scales it, so a step the optimizer
        skipped on the device leaves the shadow exactly as it was (``x + 0 * (p - x) == x``) and the
        count where it was."""
        weight: float | torch.Tensor = 1.0 - self._decay_now(keep)
        if keep is not None:
            weight = keep * weight
        for name, p in model.named_parameters():
            shadow = self.shadow[clean_fqn(name)]
            shadow.lerp_(p.detach(), weight if isinstance(weight, float) else weight.to(shadow.dtype))
        self.updates = self.updates + (1 if keep is None else keep.to(torch.int64))

    def updates_applied(self) -> int:
        """The count of updates applied, on the host (one sync where it lives on the device)."""
        return int(self.updates)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return dict(self.shadow)

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        missing = sorted(set(self.shadow) - set(state))
        if missing:
            raise KeyError(f"EMA state lacks {len(missing)} parameter(s), e.g. {missing[:3]}")
        for name, tensor in self.shadow.items():
            tensor.copy_(state[name])
