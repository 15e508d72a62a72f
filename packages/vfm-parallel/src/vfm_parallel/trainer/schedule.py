"""Learning rate: linear warm-up, then cosine decay to ``lr * min_lr_ratio`` at the last step.

A pure function of the step, so resuming needs no scheduler state.
"""

from __future__ import annotations

import math


def lr_at(step: int, *, lr: float, warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0) -> float:
    """The LR for optimizer step ``step`` (0-based).

    Warm-up: lr * (step + 1) / warmup_steps for step < warmup_steps (never 0, so step 0 trains).
    Cosine: lr_min + (lr - lr_min) * (1 + cos(pi * p)) / 2, p going 0 -> 1 over the remaining steps.
    """
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    lr_min = lr * min_lr_ratio
    decay_steps = total_steps - warmup_steps - 1
    # one step after the warm-up (warmup_steps = total_steps - 1) is the last: it runs at lr_min too
    progress = 1.0 if decay_steps < 1 else min((step - warmup_steps) / decay_steps, 1.0)
    return lr_min + (lr - lr_min) * 0.5 * (1.0 + math.cos(math.pi * progress))
