"""Training health: a step whose loss or gradient norm is not finite on any rank is skipped on every
rank, and ``train.max_nonfinite_steps`` of them in a row stop the run naming the steps and samples."""

from __future__ import annotations

import warnings

import torch
import torch.distributed as dist
from vfm_plugins import Notice


class NonFiniteTrainingError(RuntimeError):
    """``train.max_nonfinite_steps`` steps in a row had a non-finite loss or gradient norm."""


class TrainingWarning(Notice, RuntimeWarning):
    """Something the run went on from: a step skipped as non-finite, a checkpoint not saved for it
    (``vfm train`` prints it as one ``warning:`` line)."""


class NonFiniteGuard:
    """Decides per step whether the update may run, remembering the skipped steps in a row.

    Two ways to skip, with the same outcome (weights, AdamW's moments, step count and weight decay
    untouched, no EMA update; a warning; ``limit`` in a row raise):

    - on the host (:meth:`allows`): the decision is one host sync per step, and the update is not
      called on a skipped step;
    - on the device (``on_device``, a fused AdamW: :meth:`gate`): the update always runs, with the
      step's non-finite flag as the kernel's ``found_inf`` (the kernel then leaves every tensor as
      it was, as under GradScaler) and the EMA blending by weight 0. The flags are reviewed when the
      trainer next brings its figures to the host (:meth:`review`, at its logging interval), so a
      step costs no host sync; the warning and the error come at that point.
    """

    def __init__(self, limit: int, rank: int, world: int, on_device: bool = False) -> None:
        self.limit, self.rank, self.world, self.on_device = limit, rank, world, on_device
        self.run: list[int] = []  # the steps skipped in a row
        self.unreviewed: list[tuple[int, torch.Tensor, torch.Tensor, torch.Tensor, list[str]]] = []

    def allows(self, done: int, stats: torch.Tensor, grad_norm: torch.Tensor, local_bad: torch.Tensor,
               step_keys: list[str]) -> bool:
        """Whether step ``done`` may update the weights: no rank saw a non-finite loss or gradient
        norm (``stats[3]``, summed over all ranks, so every rank decides alike). One host sync."""
        bad = stats[3].item() != 0
        if bad:
            self._skipped(done, (stats[0] / stats[2].clamp(min=1)).item(), grad_norm.item(), local_bad, step_keys)
        else:
            self.run = []
        return not bad

    def gate(self, optimizer: torch.optim.Optimizer, done: int, stats: torch.Tensor, grad_norm: torch.Tensor,
             local_bad: torch.Tensor, step_keys: list[str]) -> torch.Tensor:
        """Device-side skip of step ``done``: sets the fused optimizer's ``found_inf`` to the step's
        flag and returns the EMA's blend factor (1, or 0 on a skipped step), both on the device."""
        bad = (stats[3] > 0).to(torch.float32)
        optimizer.found_inf = bad
        self.unreviewed.append((done, stats, grad_norm, local_bad, list(step_keys)))
        return 1.0 - bad

    def review(self) -> None:
        """The device-side flags since the last review, in step order (one sync, shared with the
        trainer's figures): warns for each skipped step, raises at ``limit`` in a row."""
        entries, self.unreviewed = self.unreviewed, []
        if not entries:
            return
        rows = torch.stack([torch.stack([s[3], s[0] / s[2].clamp(min=1), n.to(s.dtype)])
                            for _, s, n, _, _ in entries]).tolist()
        for (done, _, _, local_bad, keys), (bad, loss, norm) in zip(entries, rows):
            if bad:
                self._skipped(done, loss, norm, local_bad, keys)
            else:
                self.run = []

    def _skipped(self, done: int, loss: float, grad_norm: float, local_bad: torch.Tensor, step_keys: list[str]) -> None:
        """Step ``done`` was skipped: a warning, or :class:`NonFiniteTrainingError` naming the steps
        and the samples when it makes ``limit`` in a row."""
        self.run.append(done)
        samples = self._samples(local_bad, step_keys)
        limit = self.limit
        what = f"loss {loss:g}, gradient norm {grad_norm:g}; samples: {samples}"
        if len(self.run) >= limit:
            steps = self.run
            label = f"step {steps[0]}" if len(steps) == 1 else f"steps {', '.join(map(str, steps))}"
            raise NonFiniteTrainingError(
                f"{label} had a non-finite loss or gradient norm (last: {what}); stopped after "
                f"train.max_nonfinite_steps = {limit} in a row, without updating the weights on them or exporting")
        if self.rank == 0:
            warnings.warn(f"step {done} skipped: non-finite {what} ({len(self.run)} in a row of "
                          f"train.max_nonfinite_steps = {limit}); weights, optimizer state and EMA unchanged",
                          TrainingWarning, stacklevel=4)

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
