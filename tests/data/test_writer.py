import json
import tarfile

import braceexpand
import pytest
import yaml
import torch
import webdataset as wds
from megatron.energon import Cooker, DefaultTaskEncoder, WorkerConfig, get_savable_loader, get_train_dataset, stateless

from tests.data.helpers import meta, quiet, write_dataset
from vfm_data import ShardWriter, prepare_dataset
from vfm_data.format import decode_array


def test_shards_roll_over_at_the_size_limit(tmp_path):
    with ShardWriter(tmp_path, max_shard_bytes=8_000) as w:
        for i in range(12):
            w.write(f"s{i}", torch.randn(4, 2, 8, 8), torch.randn(4, 8), meta())
    assert len(w.shards) > 2
    assert all(p.stat().st_size < 8_000 + 4_000 for p in w.shards)


def test_a_crash_leaves_no_half_written_shard_under_a_final_name(tmp_path):
    with pytest.raises(RuntimeError):
        with ShardWriter(tmp_path, max_shard_bytes=1 << 20) as w:
            w.write("a", torch.randn(4, 1, 4, 4), torch.randn(2, 8), meta("image"))
            raise RuntimeError("crash while writing")
    assert list(tmp_path.glob("*.tar")) == []
    assert list(tmp_path.iterdir()) == []


def test_shards_load_with_plain_webdataset(tmp_path):
    write_dataset(tmp_path, 9)
    urls = sorted(str(p) for p in tmp_path.glob("*.tar"))
    samples = list(wds.WebDataset(urls, shardshuffle=False))
    assert [s["__key__"] for s in samples] == [f"k{i:05d}" for i in range(9)]
    first = samples[0]
    assert decode_array(first["latent.npy"], "npy").shape == (4, 1, 4, 4)
    assert json.loads(first["json"])["modality"] == "image"


@stateless
def _identity(raw):
    return raw


class _CrudeEncoder(DefaultTaskEncoder):
    decoder = None
    cookers = [Cooker(_identity)]


def test_shards_load_with_stock_energon_get_train_dataset(tmp_path):
    write_dataset(tmp_path, 12)
    assert (tmp_path / ".nv-meta" / "index.sqlite").exists()
    ds = get_train_dataset(tmp_path, worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0),
                           batch_size=None, shuffle_buffer_size=None, max_samples_per_sequence=None,
                           task_encoder=_CrudeEncoder(), repeat=False)
    keys = sorted(s["__key__"] for s in get_savable_loader(ds))
    assert keys == [f"k{i:05d}" for i in range(12)]


def test_split_parts_are_regular_expressions(tmp_path):
    write_dataset(tmp_path, 30, max_shard_bytes=4_000)
    shards = sorted(p.name for p in tmp_path.glob("*.tar"))
    quiet(prepare_dataset, tmp_path, split_parts=[("train", r"shard-00000[0-3]\.tar$"), ("val", r"shard-0000(0[4-9]|[1-9]\d)\.tar$")])
    split = yaml.safe_load((tmp_path / ".nv-meta" / "split.yaml").read_text())["split_parts"]
    expand = lambda names: [s for n in names for s in braceexpand.braceexpand(n)]  # noqa: E731
    assert expand(split["train"]) == shards[:4]
    assert expand(split["val"]) == shards[4:]
    with pytest.raises(ValueError, match="not a regular expression"):
        prepare_dataset(tmp_path, split_parts=[("train", "shard-(")])


def test_writer_rejects_bad_input_with_what_is_accepted(tmp_path):
    w = ShardWriter(tmp_path)
    with pytest.raises(ValueError, match="C, T, H, W"):
        w.write("a", torch.randn(4, 4, 4), torch.randn(2, 8), meta())
    with pytest.raises(TypeError, match="dtype"):
        w.write("a", torch.ones(4, 1, 4, 4, dtype=torch.int64), torch.randn(2, 8), meta("image"))
    with pytest.raises(ValueError, match="1-frame"):
        w.write("a", torch.randn(4, 2, 4, 4), torch.randn(2, 8), meta("image"))
    with pytest.raises(ValueError, match="modality"):
        meta("audio")
    w.abort()


def test_pth_members_round_trip_without_unpickling(tmp_path):
    with ShardWriter(tmp_path, array_format="pth") as w:
        w.write("a", torch.randn(4, 1, 4, 4).bfloat16(), torch.randn(2, 8), meta("image"))
    with tarfile.open(w.shards[0]) as tar:
        data = tar.extractfile("a.latent.pth").read()
    assert decode_array(data, "pth").dtype == torch.bfloat16


def test_a_shard_is_not_written_through_a_link_planted_at_the_old_temporary_name(tmp_path):
    import os

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / f".shard-000000.tar.tmp-{os.getpid()}").symlink_to(victim)  # the name the writer used to open
    with ShardWriter(out) as w:
        w.write("a", torch.randn(4, 1, 4, 4), torch.randn(2, 8), meta("image"))
    assert victim.read_text() == "precious"
    with tarfile.open(out / "shard-000000.tar") as tar:
        assert sorted(tar.getnames()) == ["a.json", "a.latent.npy", "a.text.npy"]


def test_a_temporary_shard_is_named_by_the_rule_a_leftover_sweep_globs(tmp_path):
    from vfm_data.writer import temporary_prefix

    w = ShardWriter(tmp_path)
    w.write("a", torch.randn(4, 1, 4, 4), torch.randn(2, 8), meta("image"))
    [tmp] = tmp_path.iterdir()  # the open shard, before it is finished
    assert tmp.name.startswith(temporary_prefix("shard-000000.tar")) and tmp in tmp_path.glob(temporary_prefix("shard-*.tar") + "*")
    w.abort()
    assert list(tmp_path.iterdir()) == []


META_FILES = ("dataset.yaml", "split.yaml", ".info.json", ".info.yaml", "index.uuid", "index.sqlite", "index.sqlite-journal")


def test_prepare_dataset_replaces_links_planted_in_nv_meta_and_leaves_their_targets_alone(tmp_path):
    """A shard folder from elsewhere may hold ``.nv-meta/dataset.yaml -> ~/.bashrc``: preparing it again
    (``vfm shard -o`` there) must not write through the link."""
    outside = tmp_path / "home"
    outside.mkdir()
    out = tmp_path / "shards"
    write_dataset(out, 6)
    meta_dir = out / ".nv-meta"
    for name in META_FILES:
        (meta_dir / name).unlink(missing_ok=True)
        victim = outside / name.strip(".")
        victim.write_text("" if name == "index.sqlite" else "precious")  # an empty file is a database sqlite would write
        (meta_dir / name).symlink_to(victim)
    quiet(prepare_dataset, out)
    assert {p.name: p.read_text() for p in outside.iterdir()} == {
        name.strip("."): "" if name == "index.sqlite" else "precious" for name in META_FILES}
    assert not any(p.is_symlink() for p in meta_dir.iterdir())
    assert yaml.safe_load((meta_dir / "dataset.yaml").read_text())["__class__"] == "CrudeWebdataset"
    ds = get_train_dataset(out, worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0), batch_size=None,
                           shuffle_buffer_size=None, max_samples_per_sequence=None, task_encoder=_CrudeEncoder(), repeat=False)
    assert len(list(get_savable_loader(ds))) == 6


def test_prepare_dataset_replaces_an_nv_meta_folder_that_is_a_link_and_leaves_the_linked_folder_alone(tmp_path):
    outside = tmp_path / "config"
    outside.mkdir()
    (outside / "settings").write_text("precious")
    out = tmp_path / "shards"
    write_dataset(out, 3)
    import shutil

    shutil.rmtree(out / ".nv-meta")
    (out / ".nv-meta").symlink_to(outside, target_is_directory=True)
    quiet(prepare_dataset, out)
    assert [p.name for p in outside.iterdir()] == ["settings"] and (outside / "settings").read_text() == "precious"
    assert not (out / ".nv-meta").is_symlink() and (out / ".nv-meta" / "dataset.yaml").is_file()


def test_prepare_dataset_prints_nothing_when_it_succeeds(tmp_path, capfd):
    # a library call: energon's "Saving info to ..." and "Collapsing split parts... Done" lines went to stdout
    with ShardWriter(tmp_path, max_shard_bytes=1 << 20) as w:
        w.write("a", torch.randn(4, 1, 4, 4), torch.randn(2, 8), meta("image"))
    prepare_dataset(tmp_path)
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    assert (tmp_path / ".nv-meta" / "dataset.yaml").is_file()


def test_prepare_dataset_passes_on_what_energon_printed_when_it_fails(tmp_path, capfd):
    # energon prints its reasons (here the duplicate key) before it ends: the curator's index rebuild reads them
    for part in ("a", "b"):
        with ShardWriter(tmp_path / part, max_shard_bytes=1 << 20) as w:
            w.write("same", torch.randn(4, 1, 4, 4), torch.randn(2, 8), meta("image"))
    (tmp_path / "b" / "shard-000000.tar").rename(tmp_path / "a" / "shard-000001.tar")
    with pytest.raises(ValueError, match="same"):
        prepare_dataset(tmp_path / "a")
    out, err = capfd.readouterr()
    assert "same" in out + err
