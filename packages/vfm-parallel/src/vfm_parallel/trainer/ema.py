"""Exponential moving average of the weights, kept in the same sharding as the parameters."""

from __future__ import annotations

import torch
from torch import nn


def clean_fqn(name: str) -> str:
    """A parameter name without wrapper prefixes (activation checkpointing, torch.compile), so EMA
    keys match the model's state-dict keys whatever wrappers a layout adds."""
    return name.replace("_checkpoint_wrapped_module.", "").replace("_orig_mod.", "")


class EMA:
    """``ema = decay * ema + (1 - decay) * param`` after every optimizer step.

    The shadow tensors are detached clones of the parameters, so under FSDP/TP they are DTensors
    with the same placements and each rank updates only its own shard (no communication).
    """

    def __init__(self, model: nn.Module, decay: float) -> None:
        self.decay = decay
        self.shadow: dict[str, torch.Tensor] = {
            clean_fqn(name): p.detach().clone() for name, p in model.named_parameters()
        }

    @torch.no_grad()
    def update(self, model: nn.Module, keep: torch.Tensor | None = None) -> None:
        """One blend; ``keep`` (a 0-dim device tensor, 1 or 0) scales it, so a step the optimizer
        skipped on the device leaves the shadow exactly as it was (``x + 0 * (p - x) == x``)."""
        weight: float | torch.Tensor = 1.0 - self.decay
        if keep is not None:
            weight = keep * weight
        for name, p in model.named_parameters():
            shadow = self.shadow[clean_fqn(name)]
            shadow.lerp_(p.detach(), weight if isinstance(weight, float) else weight.to(shadow.dtype))

    def state_dict(self) -> dict[str, torch.Tensor]:
        return dict(self.shadow)

    @torch.no_grad()
    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        missing = sorted(set(self.shadow) - set(state))
        if missing:
            raise KeyError(f"EMA state lacks {len(missing)} parameter(s), e.g. {missing[:3]}")
        for name, tensor in self.shadow.items():
            tensor.copy_(state[name])
