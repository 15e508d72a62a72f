"""The same samples make the same shard bytes: tar members are stamped ``SOURCE_DATE_EPOCH`` (the
reproducible-builds convention) or 0, never the clock, so a shard's checksum says whether its data
changed."""

from __future__ import annotations

import hashlib
import tarfile
import time

import pytest
import torch

from tests.data.helpers import meta
from vfm_data import ShardWriter


def _write(folder, count: int = 3) -> str:
    g = torch.Generator().manual_seed(0)
    with ShardWriter(folder) as w:
        for i in range(count):
            w.write(f"s{i}", torch.randn(4, 2, 4, 4, generator=g), torch.randn(3, 8, generator=g), meta())
    (shard,) = w.shards
    return hashlib.sha256(shard.read_bytes()).hexdigest()


def test_the_same_samples_written_a_second_later_are_the_same_bytes(tmp_path, monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    first = _write(tmp_path / "one")
    time.sleep(1.1)  # a clock stamp would differ now
    assert _write(tmp_path / "two") == first
    with tarfile.open(next((tmp_path / "two").glob("*.tar"))) as tar:
        assert {m.mtime for m in tar.getmembers()} == {0}


def test_members_carry_source_date_epoch_when_it_is_set(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    _write(tmp_path)
    with tarfile.open(next(tmp_path.glob("*.tar"))) as tar:
        assert {m.mtime for m in tar.getmembers()} == {1700000000}


@pytest.mark.parametrize("value", ["yesterday", "-5", "1.5"])
def test_a_source_date_epoch_that_is_not_whole_seconds_is_refused_naming_it(tmp_path, monkeypatch, value):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", value)
    with pytest.raises(ValueError, match=rf"SOURCE_DATE_EPOCH='{value}'.*whole seconds"):
        ShardWriter(tmp_path)
