"""Model-parallel subset loading: each rank of a TP/CP group reads a different part of the step's
batch; an all-gather makes the full batch identical on every rank (energon does not offer this).
Batches that cannot be concatenated (one bucket each) are read by one rank in turn and broadcast."""

from __future__ import annotations

from typing import Any

import torch.distributed as dist

from vfm_data.batches import concat_batches


class _Failed:
    """What a rank that could not read its part sends the group instead: the error, raised everywhere."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _raise_failed(parts: list[Any]) -> None:
    for part in parts:
        if isinstance(part, _Failed):
            raise part.error


def gather_batches(batch: Any, group: Any) -> Any:
    """All-gather this rank's part and concatenate the parts in group-rank order."""
    parts: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(parts, batch, group=group)
    _raise_failed(parts)
    return concat_batches(parts)


def share_batch(batch: Any, owner: int, group: Any) -> Any:
    """The batch that group rank ``owner`` read (``batch`` there, ``None`` elsewhere), on every rank."""
    box = [batch]
    dist.broadcast_object_list(box, src=dist.get_global_rank(group, owner), group=group)
    _raise_failed(box)
    return box[0]


def share_failure(error: BaseException, owner: int, group: Any, *, whole: bool) -> None:
    """Take part in the step's collective (:func:`share_batch` if ``whole``, else :func:`gather_batches`)
    with ``error`` instead of a batch: the other ranks raise it. The caller raises it itself."""
    if whole:
        dist.broadcast_object_list([_Failed(error)], src=dist.get_global_rank(group, owner), group=group)
    else:
        dist.all_gather_object([None] * dist.get_world_size(group), _Failed(error), group=group)
