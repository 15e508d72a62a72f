"""A ``split_part`` the dataset does not have is one error when the loader is made, naming the folder
or blend, the splits it has and what is accepted (energon: a bare ``AssertionError: Invalid split
part`` or ``KeyError: 'train'`` at the first batch)."""

from __future__ import annotations

import pytest

from tests.data.helpers import write_dataset
from vfm_data import make_loader, write_blend
from vfm_data.blend_file import SplitNotFoundError

OPTIONS = dict(patch_size=2, batch_size=2, max_seq_len=64)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_dataset(tmp_path_factory.mktemp("split"), 8)


def test_a_folder_without_the_split_is_refused_naming_the_splits_it_has(folder):
    with pytest.raises(SplitNotFoundError, match=rf"{folder} has no split 'val'; it has 'train'; accepted: split_part="):
        make_loader(folder, split_part="val", **OPTIONS)


def test_a_blend_without_the_split_is_refused_naming_the_splits_it_has(folder, tmp_path):
    blend = write_blend(tmp_path / "blend.yaml", [(folder, 1.0)], split_part="val")
    with pytest.raises(SplitNotFoundError, match=r"blend.yaml has no split 'train'; it has 'val'"):
        make_loader(blend, **OPTIONS)


def test_a_folder_a_blend_names_without_the_split_is_refused_naming_the_blend_entry(folder, tmp_path):
    blend = tmp_path / "blend.yaml"
    blend.write_text(write_blend(tmp_path / "x.yaml", [(folder, 1.0)]).read_text().replace("train", "val"))
    with pytest.raises(SplitNotFoundError, match=rf"{folder} \(named by {blend} splits.val.blend\[0\]\) has no split 'val'"):
        make_loader(blend, split_part="val", **OPTIONS)


def test_the_split_the_dataset_has_still_loads(folder):
    assert next(make_loader(folder, split_part="train", **OPTIONS)).keys
