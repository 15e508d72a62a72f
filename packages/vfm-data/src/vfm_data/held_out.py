"""Held-out clips for a validation loss: the first ``count`` samples of a split part (``val`` by
default) of a dataset folder or blend, in energon's validation order (no shuffling, no repeats), so
every run and every rank reads the same clips. Decoded and cropped to the patch as the training
loader decodes and crops them (:class:`~vfm_data.task_encoder.VideoTaskEncoder`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from vfm_data.blend_file import check_split
from vfm_data.errors import ShardError, raise_sample_error
from vfm_data.sample import VideoSample
from vfm_data.trust import check_dataset


def held_out_samples(path: str | os.PathLike, count: int, *, split_part: str = "val", patch_size: int = 1,
                     temporal_patch: int = 1, latent_channels: int | None = None,
                     trust_dataset_code: bool = False) -> list[VideoSample]:
    """The first ``count`` decodable samples of ``split_part`` (fewer when the split holds fewer).

    ``path``: a prepared dataset folder or a blend file (its ``splits.<split_part>`` entries). The
    metadata is checked as the loader checks it (``trust_dataset_code``); a split part the data does
    not have is a :class:`~vfm_data.blend_file.SplitNotFoundError` naming the ones it has; a split
    with no decodable sample is a :class:`~vfm_data.errors.ShardError`."""
    from megatron.energon import WorkerConfig, get_loader, get_val_dataset

    import vfm_data.stream  # noqa: F401 - it silences energon's pin_memory warning on a CPU machine, as for training
    from vfm_data.task_encoder import VideoTaskEncoder

    path = Path(path)
    check_dataset(path, trust_dataset_code=trust_dataset_code)
    check_split(path, split_part)
    encoder = VideoTaskEncoder(patch_size=patch_size, temporal_patch=temporal_patch, latent_channels=latent_channels)
    worker_config = WorkerConfig(rank=0, world_size=1, num_workers=0, global_error_handler=raise_sample_error)
    dataset = get_val_dataset(path, split_part=split_part, worker_config=worker_config, batch_size=1,
                              task_encoder=encoder)
    samples: list[VideoSample] = []
    for batch in get_loader(dataset, watchdog_timeout_seconds=None):  # no worker processes (num_workers 0): read here, in order
        samples.append(_one(batch))
        if len(samples) == count:
            break
    if not samples:
        raise ShardError(f"vfm_data: split {split_part!r} of {path} has no decodable sample ({encoder.skips.summary()})")
    return samples


def _one(batch: Any) -> VideoSample:
    """A batch of one (energon's validation datasets batch) as its sample's latent, text and key."""
    length = int(batch.text_mask[0].sum())
    return VideoSample(__key__=batch.keys[0], __restore_key__=(), latent=batch.latents[0], text=batch.text[0],
                       text_length=length, meta=batch.metas[0], nbytes=batch.nbytes)
