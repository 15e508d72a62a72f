"""Training health: a step whose loss or gradient norm is not finite on any rank is skipped on every
rank, and ``train.max_nonfinite_steps`` of them in a row stop the run naming the steps and samples."""

from __future__ import annotations

import warnings

import torch
import torch.distributed as dist


class NonFiniteTrainingError(RuntimeError):
    """``train.max_nonfinite_steps`` steps in a row had a non-finite loss or gradient norm."""


class NonFiniteGuard:
    """Decides per step whether the update may run, remembering the skipped steps in a row."""

    def __init__(self, limit: int, rank: int, world: int) -> None:
        self.limit, self.rank, self.world = limit, rank, world
        self.run: list[int] = []  # the steps skipped in a row

    def allows(self, done: int, stats: torch.Tensor, grad_norm: torch.Tensor, local_bad: torch.Tensor,
               step_keys: list[str]) -> bool:
        """Whether step ``done`` may update the weights: no rank saw a non-finite loss or gradient
        norm (``stats[3]``, summed over all ranks, so every rank decides alike).

        The one host sync per step: the update depends on it. Otherwise the step is skipped (no
        optimizer step, so AdamW's moments, step count and weight decay are untouched; no EMA
        update) with a warning, and ``limit`` such steps in a row raise
        :class:`NonFiniteTrainingError` naming the steps and the samples."""
        if stats[3].item() == 0:
            self.run = []
            return True
        self.run.append(done)
        samples = self._samples(local_bad, step_keys)
        limit = self.limit
        loss = (stats[0] / stats[2].clamp(min=1)).item()
        what = f"loss {loss:g}, gradient norm {grad_norm.item():g}; samples: {samples}"
        if len(self.run) >= limit:
            steps = self.run
            label = f"step {steps[0]}" if len(steps) == 1 else f"steps {', '.join(map(str, steps))}"
            raise NonFiniteTrainingError(
                f"{label} had a non-finite loss or gradient norm (last: {what}); stopped after "
                f"train.max_nonfinite_steps = {limit} in a row, without updating the weights on them or exporting")
        if self.rank == 0:
            warnings.warn(f"step {done} skipped: non-finite {what} ({len(self.run)} in a row of "
                          f"train.max_nonfinite_steps = {limit}); weights, optimizer state and EMA unchanged",
                          RuntimeWarning, stacklevel=3)
        return False

    def _samples(self, local_bad: torch.Tensor, step_keys: list[str]) -> str:
        """The keys of the samples of this step on the ranks whose own loss or norm was not finite
        (a collective, run only on a skipped step, which every rank takes together)."""
        mine = (self.rank, bool(local_bad), step_keys)
        everyone = [mine]
        if dist.is_initialized():
            everyone = [None] * self.world
            dist.all_gather_object(everyone, mine)
        bad = [r for r in everyone if r[1]] or everyone
        named = [f"rank {rank}: {', '.join(keys)}" for rank, _, keys in bad if keys]
        return "; ".join(named) if named else "the batches carry no sample keys"
