"""Growing a shard folder with a second writer, and what a sample without text is told."""

import pytest
import torch

from tests.data.helpers import meta, quiet, write_dataset
from vfm_data import ShardWriter, make_loader, prepare_dataset


def test_a_second_writer_is_told_the_start_index_that_appends_and_the_grown_folder_loads(tmp_path):
    write_dataset(tmp_path, 10, max_shard_bytes=5000)
    assert len(list(tmp_path.glob("*.tar"))) == 10
    with pytest.raises(FileExistsError, match=r"pass start_index=10 .*run prepare_dataset on it again"):
        with ShardWriter(tmp_path) as w:
            w.write("late", torch.randn(4, 1, 4, 4), torch.randn(2, 8), meta("image"))
    assert not list(tmp_path.glob(".*tmp*"))  # the refused writer left nothing behind
    with ShardWriter(tmp_path, start_index=10) as w:
        for i in range(6):
            w.write(f"new{i}", torch.randn(4, 1, 4, 4), torch.randn(2, 8), meta("image"))
    quiet(prepare_dataset, tmp_path)
    loader = make_loader(tmp_path, patch_size=2, batch_size=4, max_seq_len=64, streams=1, shuffle_buffer=None)
    keys = {k for _ in range(12) for k in next(loader).keys}
    assert keys == {f"k{i:05d}" for i in range(10)} | {f"new{i}" for i in range(6)}


@pytest.mark.parametrize("text", [None, torch.zeros(0, 8)], ids=["none", "zero-rows"])
def test_a_sample_without_text_says_what_an_unconditional_sample_writes(tmp_path, text):
    with pytest.raises(ValueError, match=r"sample 'u0' has no text embedding.*empty caption's embedding"):
        with ShardWriter(tmp_path) as w:
            w.write("u0", torch.randn(4, 2, 4, 4), text, meta())
