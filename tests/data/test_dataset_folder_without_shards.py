"""A folder without shards given as a dataset says what it holds and what to pass instead: vfm shard's
output folder its blend.yaml, a folder of prepared dataset folders one of them or a blend of them, an
empty one that it has no samples. Each was told "accepted: a folder vfm shard or
vfm_data.prepare_dataset wrote", which vfm shard's output folder is, and which prepare_dataset
refuses for a folder without shards."""

from __future__ import annotations

import pytest

from tests.data.helpers import write_dataset
from vfm_data import make_loader, write_blend
from vfm_data.trust import UnpreparedDatasetError

OPTIONS = dict(patch_size=2, batch_size=1)


def test_the_folder_vfm_shard_wrote_is_told_to_pass_its_blend_file(tmp_path):
    write_dataset(tmp_path / "32x32x2", 4)
    write_blend(tmp_path / "blend.yaml", [(tmp_path / "32x32x2", 4.0)])
    with pytest.raises(UnpreparedDatasetError, match=rf"{tmp_path} holds no \.tar shards but a blend file: pass "
                                                     rf"{tmp_path / 'blend.yaml'}"):
        make_loader(tmp_path, **OPTIONS)


def test_a_folder_of_dataset_folders_is_told_to_pass_one_or_a_blend_of_them(tmp_path):
    for name in ("b", "a"):
        write_dataset(tmp_path / name, 4, prefix=name)
    with pytest.raises(UnpreparedDatasetError, match=rf"{tmp_path} holds no \.tar shards but the prepared dataset "
                                                     r"folders a, b: pass one of them, or a blend of them \(vfm_data.write_blend"):
        make_loader(tmp_path, **OPTIONS)


def test_an_empty_folder_in_a_blend_is_named_as_having_no_samples(small_dataset, tmp_path):
    import yaml

    empty = tmp_path / "empty"
    empty.mkdir()
    blend = tmp_path / "blend.yaml"  # written by hand: write_blend refuses an empty folder itself
    blend.write_text(yaml.safe_dump({"__module__": "megatron.energon", "__class__": "MetadatasetV2", "splits": {
        "train": {"blend": [{"weight": 1.0, "path": str(small_dataset)}, {"weight": 1.0, "path": str(empty)}]}}}))
    with pytest.raises(UnpreparedDatasetError, match=rf"{empty} holds no \.tar shards: no samples to read; accepted: .*"
                                                     rf"\(named by {blend} splits.train.blend\[1\].path\)"):
        make_loader(blend, **OPTIONS)
