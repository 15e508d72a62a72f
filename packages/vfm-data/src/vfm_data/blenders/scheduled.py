"""A step-scheduled blend: dataset weights that change over training.

The schedule is a list of ``(samples, weights)`` milestones over the number of samples drawn by the
whole job; weights are interpolated linearly between milestones and held after the last one
(repeat a milestone's weights to get steps instead of ramps). Each stream counts what it drew and
multiplies by ``progress_scale`` (the number of streams in the job) to estimate the job's progress.
The loader's shuffle buffer is split over the datasets *before* this blend (see
``VideoTaskEncoder.build_train_datasets``), so a sample comes out when it is drawn, not a buffer later.
"""

from __future__ import annotations

import bisect
from typing import Any, Dict, Iterator, List, Sequence

import torch
from megatron.energon import SavableDataset, WorkerConfig
from megatron.energon.flavors.base_dataset import add_sample_restore_key
from megatron.energon.rng import WorkerRng
from megatron.energon.wrappers.base import BaseWrapperDataset

from vfm_data.blenders.options import BlenderOptionError, weight_schedule


def _validate(schedule: Sequence[tuple[int, Sequence[float]]], n: int | None = None) -> list[tuple[int, list[float]]]:
    out = weight_schedule("scheduled", "schedule", schedule)
    if n is not None and len(out[0][1]) != n:
        raise BlenderOptionError("scheduled", "schedule", schedule, f"{n} weight{'s' * (n != 1)} per milestone (this blend "
                                 f"has {n} dataset{'s' * (n != 1)}; one weight each, in the blend's order), not {len(out[0][1])}")
    return out


def weights_at(schedule: Sequence[tuple[int, Sequence[float]]], progress: float) -> list[float]:
    """The (unnormalised) weights at ``progress`` samples: linear between milestones, clamped outside."""
    steps = [at for at, _ in schedule]
    i = bisect.bisect_right(steps, progress)
    if i == 0:
        return list(schedule[0][1])
    if i == len(schedule):
        return list(schedule[-1][1])
    (a, wa), (b, wb) = schedule[i - 1], schedule[i]
    f = (progress - a) / (b - a)
    return [x + f * (y - x) for x, y in zip(wa, wb)]


class ScheduledBlendDataset(BaseWrapperDataset):
    """Like energon's ``BlendDataset``, but the weights follow a schedule over samples drawn."""

    _savable_fields = ("_worker_rng", "_drawn")

    def __init__(
        self,
        datasets: Sequence[SavableDataset],
        schedule: Sequence[tuple[int, Sequence[float]]],
        *,
        progress_scale: int,
        worker_config: WorkerConfig,
    ) -> None:
        self.datasets = list(datasets)
        super().__init__(self.datasets, worker_config=worker_config)
        self.schedule = _validate(schedule, len(self.datasets))
        self.progress_scale = progress_scale
        self.reset_state_own()

    def reset_state_own(self) -> None:
        self._worker_rng = WorkerRng(self.worker_config)
        self._drawn = 0

    def len_worker(self, worker_idx: int | None = None) -> int:
        return sum(d.len_worker(worker_idx) for d in self.datasets)

    def __iter__(self) -> Iterator:
        iters = [iter(d) for d in self.datasets]  # inner datasets repeat: never exhausted
        while True:
            weights = torch.tensor(weights_at(self.schedule, self._drawn * self.progress_scale))
            idx = self._worker_rng.choice_idx(probs=weights / weights.sum())
            sample = next(iters[idx])
            self._drawn += 1
            yield add_sample_restore_key(sample, idx, src=self)

    def config(self) -> Dict[str, Any]:
        return {
            "type": type(self).__qualname__,
            "datasets": [d.config() for d in self.datasets],
            "schedule": self.schedule,
            "progress_scale": self.progress_scale,
            "worker_config": self.worker_config.config(),
        }

    def __str__(self) -> str:
        return f"ScheduledBlendDataset(schedule={self.schedule}, datasets={self.datasets})"


class ScheduledBlender:
    """``schedule``: ``[(samples, [w_dataset0, w_dataset1, ...]), ...]`` in metadataset order."""

    def __init__(self, schedule: List[tuple[int, Sequence[float]]]) -> None:
        self.schedule = _validate(schedule)

    def check_datasets(self, count: int) -> None:
        """Refuse a schedule whose milestones do not hold one weight per dataset of the blend."""
        _validate(self.schedule, count)

    def blend(self, dataset_weights, *, worker_config: WorkerConfig, progress_scale: int = 1) -> SavableDataset:
        return ScheduledBlendDataset(
            [d for d, _ in dataset_weights], self.schedule, progress_scale=progress_scale, worker_config=worker_config
        )

    def bucket(self, sample: Any) -> None:
        return None
