"""``vfm_data.held_out.held_out_samples``: the first clips of a split part in shard and file order, the
same every call, cropped to the patch as the loader crops them; a missing split names the ones there are."""

from __future__ import annotations

import warnings

import pytest

from tests.data.helpers import quiet, write_dataset
from vfm_data import prepare_dataset
from vfm_data.blend_file import SplitNotFoundError
from vfm_data.held_out import held_out_samples

TRAIN, VAL = r"shard-00000[0-3]\.tar$", r"shard-0000(0[4-9]|[1-9]\d)\.tar$"


@pytest.fixture(scope="module")
def split_dataset(tmp_path_factory):
    folder = write_dataset(tmp_path_factory.mktemp("held") / "ds", 30, max_shard_bytes=3000)
    quiet(prepare_dataset, folder, split_parts=[("train", TRAIN), ("val", VAL)])
    return folder


@pytest.fixture(autouse=True)
def _no_pin_memory_note():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*pin_memory.*")
        yield


def test_the_held_out_samples_are_the_first_of_the_val_split_in_order_every_time(split_dataset):
    first = held_out_samples(split_dataset, 5, patch_size=2)
    again = held_out_samples(split_dataset, 5, patch_size=2)
    keys = [str(s.__key__) for s in first]
    assert keys == [str(s.__key__) for s in again]
    train_keys = {str(s.__key__) for s in held_out_samples(split_dataset, 100, split_part="train")}
    assert not set(keys) & train_keys  # none of them is trained on
    assert keys == sorted(keys) and len(keys) == 5  # the val shards' first samples, in file order
    assert all(s.latent.shape[2] % 2 == 0 and s.latent.shape[3] % 2 == 0 for s in first)
    assert all(s.text.shape[0] == s.text_length for s in first)


def test_asking_for_more_held_out_samples_than_the_split_has_gives_them_all(split_dataset):
    every = held_out_samples(split_dataset, 10_000)
    train = held_out_samples(split_dataset, 10_000, split_part="train")
    assert len(every) + len(train) == 30


def test_a_split_the_dataset_lacks_is_refused_naming_the_splits_it_has(split_dataset):
    with pytest.raises(SplitNotFoundError, match="has no split 'test'; it has 'train', 'val'"):
        held_out_samples(split_dataset, 4, split_part="test")
