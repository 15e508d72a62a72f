"""The hint for a folder of vfm samples without an energon index, when ``vfm shard`` wrote it: its
val shards (``--val-fraction``) would be indexed as train by ``energon prepare --split-ratio 1,0,0``
or ``prepare_dataset(folder)``, so the hint is ``vfm shard`` into its output folder again, which
rebuilds the index with both split parts. A folder of other tars keeps energon's commands."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.data.helpers import meta
from vfm_data import ShardWriter
from vfm_data.errors import ShardError
from vfm_data.sample import first_sample
from vfm_data.trust import UntrustedDatasetError, check_dataset


def _unprepared(folder: Path, prefixes: tuple[str, ...]) -> Path:
    """vfm samples in shards named ``<prefix>-NNNNNN.tar`` (vfm shard's train ``shard``, val ``val``), no .nv-meta/."""
    for n, prefix in enumerate(prefixes):
        with ShardWriter(folder, prefix=prefix) as w:
            w.write(f"{prefix}{n}", torch.randn(4, 2, 4, 4), torch.randn(3, 8), meta())
    assert not (folder / ".nv-meta").exists()
    return folder


def _refusals(folder: Path) -> list[str]:
    with pytest.raises(UntrustedDatasetError) as checked:
        check_dataset(folder)
    with pytest.raises(ShardError) as probed:  # what vfm train probes first
        first_sample(folder, warn=False)
    return [str(checked.value), str(probed.value)]


def test_a_folder_with_val_shards_and_no_index_names_vfm_shard_not_a_split_ratio_that_trains_on_val(tmp_path):
    bucket = _unprepared(tmp_path / "shards" / "32x48x5", ("shard", "val"))
    for message in _refusals(bucket):
        assert f"index it first: run vfm shard into {tmp_path / 'shards'} again" in message, message
        assert "val-*.tar val shards as train" in message and "not energon prepare --split-ratio 1,0,0" in message


def test_a_bucket_folder_under_vfm_shards_settings_names_vfm_shard_though_it_has_no_val_shards(tmp_path):
    bucket = _unprepared(tmp_path / "shards" / "32x48x5", ("shard",))
    (tmp_path / "shards" / "shard_config.json").write_text("{}")
    for message in _refusals(bucket):
        assert f"run vfm shard into {tmp_path / 'shards'} again" in message and "energon prepare" not in message, message


def test_a_folder_of_train_shards_alone_keeps_energons_prepare_commands(tmp_path):
    bucket = _unprepared(tmp_path / "mine", ("shard",))
    for message in _refusals(bucket):
        assert "energon prepare" in message and "--split-ratio 1,0,0" in message and "vfm shard into" not in message
