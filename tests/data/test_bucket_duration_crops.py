"""A bucketed blend crops a sample to the largest of its ``durations`` that fits: frames are lost (a
2-frame video under durations [4] becomes a 1-frame image), so the crop is counted and named, never
silent."""

from __future__ import annotations

import warnings

import torch

from tests.data.helpers import meta, quiet
from vfm_data import ShardWriter, make_loader, prepare_dataset


def _two_frame_videos(folder, n):
    """``n`` prepared samples of 2 latent frames each (C, T, H, W) = (4, 2, 4, 4)."""
    with ShardWriter(folder, max_shard_bytes=1 << 20) as w:
        for i in range(n):
            w.write(f"s{i}", torch.randn(4, 2, 4, 4), torch.randn(3, 8), meta())
    quiet(prepare_dataset, folder)


def test_a_video_cropped_to_the_bucketed_durations_is_counted_and_named(tmp_path):
    _two_frame_videos(tmp_path, 8)
    loader = make_loader(tmp_path, patch_size=2, batch_size=2, streams=1, blender="bucketed",
                         blender_options={"durations": [4], "batch_size": 2})
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        batches = [next(loader) for _ in range(4)]
    assert {tuple(b.latents.shape[1:]) for b in batches} == {(4, 1, 4, 4)}  # the crop itself is as documented
    named = [str(r.message) for r in record if "duration" in str(r.message)]
    assert len(named) == 1  # the first per shard
    assert "2 latent frames cropped to 1" in named[0] and "[1, 4]" in named[0] and "add 2" in named[0]
    metrics = loader.metrics()
    assert metrics["data_duration_crop"] == len({k for b in batches for k in b.keys})
    assert metrics["data_skipped"] == 0  # cropped samples are used


def test_samples_the_durations_fit_are_not_counted_as_crops(tmp_path):
    _two_frame_videos(tmp_path, 4)
    loader = make_loader(tmp_path, patch_size=2, batch_size=2, streams=1, blender="bucketed",
                         blender_options={"durations": [2], "batch_size": 2})
    next(loader)
    assert "duration_crop" not in loader.counts and "data_duration_crop" not in loader.metrics()
