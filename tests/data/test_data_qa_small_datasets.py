"""A dataset too small for the loader's readers (streams x data-parallel ranks) is a clear error
naming the number of samples that loads."""

import pytest

from tests.data.helpers import write_dataset
from vfm_data import make_loader
from vfm_data.errors import ShardError

OPTIONS = dict(patch_size=2, batch_size=1, max_seq_len=64, packing_buffer=8, shuffle_buffer=None)


@pytest.mark.parametrize("workers", [0, 1])
def test_a_dataset_with_fewer_samples_than_readers_names_the_numbers(tmp_path, workers):
    folder = write_dataset(tmp_path / "three", 3)
    loader = make_loader(folder, num_workers=workers, streams=2, dp_rank=1, dp_world=2, **OPTIONS)
    # energon's own message was "AssertionError: Cannot repeat empty dataset indefinitely"
    with pytest.raises(ShardError, match=r"stream 1 of data-parallel rank 1 gets no sample of .*three.*"
                                         r"among 4 readers \(streams 2 x data-parallel ranks 2\).*at least 4 samples"):
        for _ in range(2):
            next(loader)
    loader.close()
    # the number the error gives is the one that loads: one sample per reader
    four = write_dataset(tmp_path / "four", 4)
    keys = {k for dp in range(2) for s in [make_loader(four, streams=2, dp_rank=dp, dp_world=2, **OPTIONS)]
            for _ in range(2) for k in next(s).keys}
    assert keys == {f"k{i:05d}" for i in range(4)}



@pytest.mark.parametrize("dp_world", [1, 2])
def test_the_default_streams_fit_a_dataset_smaller_than_four_readers_per_rank(tmp_path, dp_world):
    """A 3-clip smoke test: the default (4 streams per rank) left reader 3 without a sample, and the
    step that reached it failed; the default now takes as many streams as each rank has samples."""
    from vfm_data.loader import default_streams

    folder = write_dataset(tmp_path / "three", 3 * dp_world)
    assert default_streams(folder, dp_world=dp_world) == 3
    assert default_streams(write_dataset(tmp_path / "many", 40), dp_world=dp_world) == 4
    assert default_streams(write_dataset(tmp_path / "tp2", 3 * dp_world), 2, dp_world=dp_world) == 2
    keys = set()
    for dp in range(dp_world):
        loader = make_loader(folder, dp_rank=dp, dp_world=dp_world, **OPTIONS)
        assert loader.spec.streams == 3
        keys |= {k for _ in range(7) for k in next(loader).keys}  # past the 4th step, twice round the data
        loader.close()
    assert keys == {f"k{i:05d}" for i in range(3 * dp_world)}
