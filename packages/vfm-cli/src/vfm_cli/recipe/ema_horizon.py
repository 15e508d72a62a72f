"""The export of a run holds its EMA weights: a run much shorter than the EMA's memory, without the EMA's warm-up,
exports weights that are still mostly the random initialisation. Said before the run starts, with the decay that
fits it."""

from __future__ import annotations

import os
import warnings

from vfm_plugins import Notice
from vfm_parallel.trainer.config import TrainConfig
from vfm_parallel.trainer.ema import initial_share

#: The share of the initial weights left in the EMA at the last step above which the run is told.
INITIAL_SHARE_TOLD = 0.25
#: The decay suggested leaves e^-3 (5%) of the initial weights after train.steps.
STEPS_OF_MEMORY = 3


class ShortEMANotice(Notice):
    """The run ends before its EMA forgets the initial weights; its export generates little but noise."""


def note_short_ema(cfg: TrainConfig) -> None:
    """Warn when the initial weights' share of the exported EMA after train.steps (:func:`initial_share`:
    ``ema.decay ** train.steps`` without warm-up) exceeds :data:`INITIAL_SHARE_TOLD`. With ``ema.warmup`` (the
    default) that never happens: the first update keeps at most 0.1 of the average. Not refused: a run meant to
    be resumed with more steps, or whose export nobody samples, is a fair choice."""
    if not (cfg.ema.enabled and cfg.checkpoint.export) or cfg.train.steps < 1:
        return
    share = initial_share(cfg.ema.decay, cfg.train.steps, cfg.ema.warmup)
    if share <= INITIAL_SHARE_TOLD or int(os.environ.get("RANK", "0")) != 0:
        return  # every rank resolves the same config: one line per job
    fits = 1 - STEPS_OF_MEMORY / cfg.train.steps
    warnings.warn(
        f"ema.decay {cfg.ema.decay:g} averages over about {1 / (1 - cfg.ema.decay):.0f} steps, but train.steps {cfg.train.steps} "
        f"ends before it forgets the start: the export (the EMA weights) keeps {share:.0%} of the initial random weights "
        f"and generates little but noise, however far the loss falls; for a run this short set ema.decay = {fits:.4g} or "
        f"lower, ema.warmup = true (the default), or ema.enabled = false (export the trained weights)", ShortEMANotice,
        stacklevel=2)
