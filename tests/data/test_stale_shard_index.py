"""A shard rewritten after its folder was prepared (its ``.tar.idx`` then records other offsets) stops
the loader with one line saying so and what to run, instead of every sample of it skipped as
"unreadable"; preparing the folder again makes it load. A damaged shard is still skipped as before."""

from __future__ import annotations

import shutil

import pytest

from tests.data.helpers import quiet, write_dataset
from vfm_data import make_loader, prepare_dataset
from vfm_data.errors import ShardError
from vfm_data.stale_index import stale_index_problem

OPTIONS = dict(patch_size=1, batch_size=2, max_seq_len=128, packing_buffer=8, shuffle_buffer=None, streams=1)


def _rewritten(tmp_path):
    folder = write_dataset(tmp_path / "a", 20)
    other = write_dataset(tmp_path / "other", 20, seed=1, hw=5)  # same keys, larger latents: other offsets
    shutil.copy(other / "shard-000000.tar", folder / "shard-000000.tar")
    return folder


def test_a_shard_rewritten_after_prepare_names_the_stale_index_and_the_command_to_run(tmp_path):
    folder = _rewritten(tmp_path)
    loader = make_loader(folder, **OPTIONS)
    with pytest.raises(ShardError) as info:
        for _ in range(20):
            next(loader)
    message = str(info.value)
    assert message.startswith(f"vfm_data: shard {folder / 'shard-000000.tar'} changed after its folder was prepared: "
                              "its index (shard-000000.tar.idx) records 4 samples ending at byte 13824, the file now "
                              "holds 4 ending at byte ")
    assert f"Prepare the folder again (energon prepare {folder} " in message
    assert f"vfm_data.prepare_dataset('{folder}')" in message
    assert loader.counts["unreadable"] == 0


def test_preparing_a_rewritten_shard_again_makes_it_load(tmp_path):
    folder = _rewritten(tmp_path)
    quiet(prepare_dataset, folder)
    loader = make_loader(folder, **OPTIONS)
    keys = [k for _ in range(20) for k in next(loader).keys]
    assert len(set(keys)) == 20 and not loader.counts


def test_a_truncated_or_damaged_shard_is_not_taken_for_a_stale_index(tmp_path):
    folder = write_dataset(tmp_path / "a", 20)
    shard = folder / "shard-000000.tar"
    assert stale_index_problem(shard) is None  # as prepared
    data = shard.read_bytes()
    shard.write_bytes(data[:8192])  # cut: not a whole tar
    assert stale_index_problem(shard) is None
    shard.write_bytes(data[:3072] + b"\xff" * 512 + data[3584:])  # a damaged header inside
    assert stale_index_problem(shard) is None
