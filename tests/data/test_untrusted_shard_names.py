"""A shard folder from someone else names its shards in ``.nv-meta`` (``.info.json`` / ``.info.yaml``
``shard_counts``, ``split.yaml`` / ``split.json`` ``split_parts``), and energon opens ``folder / name``.
Those names must stay inside the folder, and the counts and brace patterns must not make energon
allocate more than the shards can hold: anything else is refused, naming the file and the key,
before energon reads a byte (real shards written by vfm's ShardWriter + prepare_dataset)."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest
import yaml

from tests.data.helpers import write_dataset
from vfm_data import make_loader
from vfm_data.errors import ShardError
from vfm_data.sample import first_sample
from vfm_data.trust import UntrustedDatasetError

OPTIONS = dict(patch_size=2, batch_size=2, max_seq_len=16, packing_buffer=8)


@pytest.fixture
def dataset(small_dataset, tmp_path):
    return shutil.copytree(small_dataset, tmp_path / "data")


@pytest.fixture(scope="module")
def secret(tmp_path_factory):
    """Someone's private dataset next to the downloaded one (keys s00000...)."""
    return write_dataset(tmp_path_factory.mktemp("private") / "secret", 6, prefix="s")


def _name(dataset, shard) -> tuple[str, str]:
    """(relative, absolute) names of ``shard`` as seen from ``dataset``."""
    return os.path.relpath(shard, dataset), str(shard)


def _point_at(dataset, name: str, *, split_file: str = "split.yaml") -> None:
    """Rewrite the metadata so that the first shard is ``name``, as a crafted folder would."""
    meta = dataset / ".nv-meta"
    info = json.loads((meta / ".info.json").read_text())
    first, *rest = info["shard_counts"]
    info["shard_counts"] = {name: info["shard_counts"][first], **{k: info["shard_counts"][k] for k in rest}}
    (meta / ".info.json").write_text(json.dumps(info))
    split = {"split_parts": {"train": [name, *rest]}, "exclude": []}
    (meta / "split.yaml").unlink()
    if split_file == "split.yaml":
        (meta / "split.yaml").write_text(yaml.safe_dump(split))
    else:
        (meta / "split.json").write_text(json.dumps(split))


def _refused(path, match: str) -> UntrustedDatasetError:
    with pytest.raises(UntrustedDatasetError, match=match) as info:
        loader = make_loader(path, **OPTIONS)
        for _, batch in zip(range(8), loader):  # the crafted names would have been read by now
            assert not any(k.startswith("s") for k in batch.keys), f"read {batch.keys} from outside the folder"
    return info.value


@pytest.mark.parametrize("form", ["relative", "absolute"])
def test_a_shard_name_outside_the_folder_is_refused_and_nothing_is_read(dataset, secret, form):
    name = _name(dataset, secret / "shard-000000.tar")[form == "absolute"]
    _point_at(dataset, name)
    err = _refused(dataset, rf"\.info\.json: shard_counts\.{name}: shard name .* points outside the dataset folder")
    assert "accepted: shard files named relative to the dataset folder and inside it" in str(err)
    assert "--trust-dataset-code" not in str(err)


def test_a_shard_name_with_a_nul_byte_is_refused_naming_it(dataset):
    _point_at(dataset, "shard-000000.tar\0")
    _refused(dataset, r"shard_counts\.shard-000000\.tar\x00: shard name 'shard-000000\.tar\\x00' is not a file name")


def test_split_json_is_checked_when_energon_reads_it(dataset, secret):
    # energon falls back to split.json when split.yaml is missing
    name = _name(dataset, secret / "shard-000000.tar")[0]
    meta = dataset / ".nv-meta"
    _point_at(dataset, "shard-000000.tar", split_file="split.json")
    split = json.loads((meta / "split.json").read_text())
    split["split_parts"]["train"][-1] = name
    (meta / "split.json").write_text(json.dumps(split))
    _refused(dataset, rf"split\.json: split_parts\.train: shard name '{name}' points outside the dataset folder")


def test_a_shard_that_links_outside_the_folder_is_refused(dataset, secret):
    shard = dataset / "shard-000000.tar"
    shard.unlink()
    shard.symlink_to(secret / "shard-000000.tar")
    (dataset / "shard-000000.tar.idx").unlink()
    (dataset / "shard-000000.tar.idx").symlink_to(secret / "shard-000000.tar.idx")
    _refused(dataset, r"shard_counts\.shard-000000\.tar: shard shard-000000\.tar is a link to .*secret/shard-000000\.tar, "
                      r"outside the dataset folder")


def test_a_sample_count_larger_than_the_shard_is_refused_at_once(dataset):
    # energon sizes its sample tables by these counts: 10**15 took minutes and all memory
    meta = dataset / ".nv-meta"
    info = json.loads((meta / ".info.json").read_text())
    info["shard_counts"]["shard-000001.tar"] = 10**6
    (meta / ".info.json").write_text(json.dumps(info))
    size = (dataset / "shard-000001.tar").stat().st_size
    start = time.monotonic()
    _refused(dataset, rf"shard_counts\.shard-000001\.tar: says 1000000 samples, more than its {size} bytes can hold "
                      rf"\(at most {size // 512}")
    assert time.monotonic() - start < 5


def test_a_brace_pattern_expanding_past_the_listed_shards_is_refused_before_expanding(dataset):
    meta = dataset / ".nv-meta"
    # a billion names (energon makes a list of them); refused after the first few
    (meta / "split.yaml").write_text(yaml.safe_dump({"split_parts": {"train": ["shard-{0000000000..0999999999}.tar"]}}))
    start = time.monotonic()
    _refused(dataset, r"split\.yaml: split_parts\.train: expands to more than \d+ names")
    assert time.monotonic() - start < 5


def test_a_split_naming_a_shard_the_info_does_not_list_is_refused(dataset):
    meta = dataset / ".nv-meta"
    split = yaml.safe_load((meta / "split.yaml").read_text())
    split["split_parts"]["train"] = ["shard-000000.tar", "other.tar"]
    (meta / "split.yaml").write_text(yaml.safe_dump(split))
    _refused(dataset, r"split\.yaml: split_parts\.train: names shard 'other\.tar', which \.info\.json does not list")


def test_first_sample_reads_no_shard_linked_from_outside(dataset, secret):
    # vfm train reads the first sample of every folder (shapes, tokenizer ids) from the *.tar files it finds
    (dataset / "a.tar").symlink_to(secret / "shard-000000.tar")
    with pytest.raises(ShardError, match=r"shard .*a\.tar is a link to .*secret/shard-000000\.tar, outside the dataset folder"):
        first_sample(dataset)


def test_a_listed_shard_that_is_missing_is_named(dataset):
    (dataset / "shard-000002.tar").unlink()
    err = _refused(dataset, r"\.info\.json: shard_counts\.shard-000002\.tar: lists shard shard-000002\.tar, which is not a "
                            r"file in .*data")
    assert "re-copy the folder" in str(err)


def test_a_shard_cut_short_after_preparing_says_to_copy_it_again_or_prepare_again(dataset):
    # the likely cause is a truncated copy or a replaced file, not crafted metadata: the message said neither
    shard = dataset / "shard-000001.tar"
    shard.write_bytes(shard.read_bytes()[:700])
    error = _refused(dataset, r"shard_counts\.shard-000001\.tar: says \d+ samples, more than its 700 bytes can hold")
    assert "smaller than when its folder was prepared" in str(error)
    assert "prepare the folder again" in str(error)


def test_an_info_json_nested_too_deep_to_read_is_refused_naming_it_not_a_recursion_traceback(dataset):
    (dataset / ".nv-meta" / ".info.json").write_text('{"shard_counts": ' + "[" * 100_000 + "]" * 100_000 + "}")
    error = _refused(dataset, r"\.info\.json: <file>: not readable JSON \(NestedTooDeepError: arrays and objects nested 100001 levels deep")
    assert str(dataset / ".nv-meta" / ".info.json") in str(error)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", [".nv-meta/split.yaml", ".nv-meta/.info.json", ".nv-meta/dataset.yaml", "<shard>.idx"])
def test_a_metadata_or_index_file_that_is_a_named_pipe_is_refused_naming_it_and_never_opened(dataset, name):
    """The check took a named pipe for a missing file (``is_file`` is False) and passed; energon then opened
    it and waited for a writer forever (split.yaml, a shard's .idx), before the first batch."""
    if name == "<shard>.idx":
        name = sorted(p.name for p in dataset.glob("*.tar.idx"))[0]
    path = dataset / name
    path.unlink()
    os.mkfifo(path)
    error = _refused(dataset, r"is not a regular file \(a named pipe")
    assert str(path) in str(error)


@pytest.mark.timeout(60)
def test_an_info_yaml_that_is_a_named_pipe_is_refused_naming_it_not_read_for_the_stream_count(dataset):
    """make_loader's default stream count reads .nv-meta/.info.yaml where there is no .info.json, before the
    check of the folder: it opened the pipe and waited for a writer forever."""
    (dataset / ".nv-meta" / ".info.json").unlink()
    path = dataset / ".nv-meta" / ".info.yaml"
    os.mkfifo(path)
    error = _refused(dataset, r"is not a regular file \(a named pipe")
    assert str(path) in str(error)
