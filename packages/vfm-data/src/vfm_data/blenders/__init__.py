"""Blenders: what mix of datasets the loader draws from, per step. Registered as plugins.

A blender is built from its options by the factory registered under its name
(``vfm_data.host.get("blenders", name)(**options)``) and gives the task encoder two things:

- ``blend(dataset_weights, worker_config=..., progress_scale=...)``: one energon dataset drawing from
  the (already repeating) inner datasets with their metadataset weights.
- ``bucket(sample)``: ``None``, or the ``(bucket key, batch size)`` of a sample, so that every batch
  holds one bucket (energon's ``batch_group_criterion``); may crop the sample to its bucket.
- optionally ``check_datasets(count)``: called by ``make_loader`` with the number of datasets the
  blend draws from (nested blends flattened), to refuse options that do not fit it (a schedule's
  weights per milestone) before any stream is built.
"""

from __future__ import annotations

from typing import Any, Hashable, Protocol, Sequence

from megatron.energon import SavableDataset, WorkerConfig


class Blender(Protocol):
    def blend(
        self,
        dataset_weights: Sequence[tuple[SavableDataset, float]],
        *,
        worker_config: WorkerConfig,
        progress_scale: int,
    ) -> SavableDataset: ...

    def bucket(self, sample: Any) -> tuple[Hashable, int] | None: ...


def get_blender(name: str, **options: Any) -> Blender:
    """Build the blender registered as ``name``; unknown names list the available ones."""
    from vfm_data.plugins import host

    return host.build("blenders", name, options)


def groups_batches(blender: Blender) -> bool:
    """Whether ``blender`` makes its own batches, one bucket each (energon's ``batch_group_criterion``):
    such batches have their own shapes and sizes, so they cannot be concatenated."""
    return hasattr(blender, "frames_bucket")
