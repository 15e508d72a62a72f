"""The weighted blend: energon's own metadataset blend (``BlendDataset``) with fixed weights."""

from __future__ import annotations

from typing import Any, Sequence

from megatron.energon import BlendDataset, SavableDataset, WorkerConfig


class WeightedBlender:
    """Draw each sample from dataset i with probability weight_i / sum(weights) (energon's blend)."""

    def blend(
        self,
        dataset_weights: Sequence[tuple[SavableDataset, float]],
        *,
        worker_config: WorkerConfig,
        progress_scale: int = 1,
    ) -> SavableDataset:
        if len(dataset_weights) == 1:
            return dataset_weights[0][0]
        return BlendDataset(*dataset_weights, worker_config=worker_config)

    def bucket(self, sample: Any) -> None:
        return None
