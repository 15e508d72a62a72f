"""A dataset path that does not exist is named as missing (a FileNotFoundError saying what is
accepted), not refused as untrusted metadata with advice to trust its code; the same for a blend
entry naming a folder that is not there, and whether or not the caller trusts dataset code."""

from __future__ import annotations

import shutil

import pytest

from vfm_data import make_loader, write_blend
from vfm_data.trust import DatasetNotFoundError, check_dataset

OPTIONS = dict(patch_size=2, batch_size=2)


@pytest.mark.parametrize("trust", [False, True], ids=["checked", "trusted"])
def test_make_loader_names_a_missing_dataset_as_missing(tmp_path, trust):
    missing = tmp_path / "no_such_dataset"
    with pytest.raises(FileNotFoundError) as info:
        make_loader(missing, trust_dataset_code=trust, **OPTIONS)
    assert isinstance(info.value, DatasetNotFoundError)
    assert str(info.value) == (f"vfm_data: {missing} does not exist; accepted: a prepared dataset folder (with .nv-meta/, "
                               f"vfm shard or vfm_data.prepare_dataset writes it) or a blend .yaml file")


def test_a_blend_entry_naming_a_missing_folder_names_the_blend_and_the_entry(small_dataset, tmp_path):
    gone = shutil.copytree(small_dataset, tmp_path / "gone")
    blend = write_blend(tmp_path / "blend.yaml", [(small_dataset, 1.0), (gone, 1.0)])
    shutil.rmtree(gone)  # moved away after the blend was written
    with pytest.raises(DatasetNotFoundError) as info:
        check_dataset(blend)
    message = str(info.value)
    assert f"{tmp_path / 'gone'} does not exist (named by {blend} splits.train.blend[1].path)" in message
    assert "trust-dataset-code" not in message
