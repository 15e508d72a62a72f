"""Every sample's ``<key>.json`` carries the shard format's version. Shards written before the field
still load; a sample from a newer writer stops the loader with one error naming the shard, the sample,
its version and the upgrade, instead of every sample being skipped as corrupt (or misread)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from tests.format_versions import assert_one_line_naming
from tests.data.helpers import quiet, rewrite_shard, write_dataset
from vfm_data import make_loader, prepare_dataset
from vfm_data.format import SAMPLE_FORMAT
from vfm_data.sample import ShardFormatError
from vfm_plugins.formats import FormatVersionError

OPTIONS = dict(patch_size=2, batch_size=2, max_seq_len=16, packing_buffer=8)


def _rewrite_metadata(folder: Path, change) -> None:
    """Each sample's json as another vfm version writes it (the tars rewritten, the index made again)."""

    def member(name: str, data: bytes) -> bytes:
        if not name.endswith(".json"):
            return data
        meta = json.loads(data)
        change(meta)
        return json.dumps(meta).encode()

    for shard in sorted(folder.glob("*.tar")):
        rewrite_shard(shard, member)
    quiet(prepare_dataset, folder)


def _first_json(folder: Path) -> dict:
    with tarfile.open(sorted(folder.glob("*.tar"))[0]) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(".json"))
        return json.loads(tar.extractfile(member).read())


def test_the_writer_puts_the_format_version_in_every_samples_json(tmp_path):
    folder = write_dataset(tmp_path / "d", 6)
    assert _first_json(folder)["format_version"] == SAMPLE_FORMAT


def test_shards_written_before_the_format_version_load_the_same_samples(tmp_path):
    folder = write_dataset(tmp_path / "d", 12)

    def first_batches():
        loader = make_loader(folder, **OPTIONS)
        batches = [next(loader) for _ in range(3)]
        assert not loader.state_dict()["counts"].get("corrupt")
        return [(list(b.keys), b.metas) for b in batches]

    before = first_batches()
    _rewrite_metadata(folder, lambda m: m.pop("format_version"))
    assert "format_version" not in _first_json(folder)
    assert first_batches() == before


def test_a_sample_of_a_newer_shard_format_stops_the_loader_naming_the_shard_version_and_upgrade(tmp_path):
    folder = write_dataset(tmp_path / "d", 12)
    _rewrite_metadata(folder, lambda m: m.update(format_version=SAMPLE_FORMAT + 1))
    with pytest.raises(FormatVersionError) as info:
        next(make_loader(folder, **OPTIONS))
    error = info.value
    assert isinstance(error, ShardFormatError), type(error)
    message = str(error)
    assert_one_line_naming(message, ".tar", "sample 'k0", f"format version {SAMPLE_FORMAT + 1}", "newer vfm",
                           f"reads version {SAMPLE_FORMAT}", "pip install -U vfm-data")
