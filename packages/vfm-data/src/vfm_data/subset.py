"""Model-parallel subset loading: each rank of a TP/CP group reads a different part of the step's
batch; an all-gather makes the full batch identical on every rank (energon does not offer this)."""

from __future__ import annotations

from typing import Any

import torch.distributed as dist

from vfm_data.batches import concat_batches


def gather_batches(batch: Any, group: Any) -> Any:
    """All-gather this rank's part and concatenate the parts in group-rank order."""
    parts: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(parts, batch, group=group)
    return concat_batches(parts)
