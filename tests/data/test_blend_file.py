"""vfm_data.blend_file reads what write_blend writes: the dataset folders a blend trains on (nested
blends followed), with one-line errors naming the file; the trust check reads blends the same way."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from tests.data.helpers import write_dataset
from tests.planted_links import plant_link
from vfm_data.blend_file import BlendFileError, dataset_folders, write_blend


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("blend")
    return root, [write_dataset(root / name, 3, prefix=name) for name in ("a", "b", "c")]


def test_a_written_blend_reads_back_as_its_folders_with_nested_blends_followed(datasets):
    root, (a, b, c) = datasets
    inner = write_blend(root / "inner.yaml", [(b, 1.0), (c, 2.0)])
    outer = root / "outer.yaml"
    outer.write_text(yaml.safe_dump({"__module__": "megatron.energon", "__class__": "MetadatasetV2",
                                     "splits": {"train": {"blend": [{"weight": 1.0, "path": "a"},
                                                                    {"weight": 1.0, "path": str(inner)}]}}}))
    assert dataset_folders(inner) == [b.resolve(), c.resolve()]
    assert dataset_folders(outer) == [a.resolve(), b.resolve(), c.resolve()]
    assert dataset_folders(a) == [a.resolve()]  # a dataset folder is itself


def test_a_missing_or_malformed_blend_is_one_error_naming_the_file(datasets, tmp_path):
    root, _ = datasets
    with pytest.raises(BlendFileError, match=f"no blend file at {tmp_path}/nope.yaml"):
        dataset_folders(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("splits:\n  valid:\n    blend: []\n")
    with pytest.raises(BlendFileError, match=rf"{bad} is not a blend file \(energon MetadatasetV2 with splits.train.blend"):
        dataset_folders(bad)
    loop = tmp_path / "loop.yaml"
    loop.write_text(yaml.safe_dump({"splits": {"train": {"blend": [{"weight": 1.0, "path": "loop.yaml"}]}}}))
    with pytest.raises(BlendFileError, match="names itself"):
        dataset_folders(loop)


def test_write_blend_replaces_a_link_at_the_blend_file_and_leaves_its_target_alone(datasets, tmp_path):
    """``blend.yaml -> ~/.bashrc`` in a shards folder from elsewhere: the blend is written beside the
    link's name (paths relative to that folder), the linked file is untouched."""
    root, (a, b, _) = datasets
    victim = plant_link(root / "linked-blend.yaml", tmp_path / "home")
    written = write_blend(root / "linked-blend.yaml", [(a, 1.0), (b, 2.0)])
    assert victim.read_text() == "precious" and not written.is_symlink()
    assert [e["path"] for e in yaml.safe_load(written.read_text())["splits"]["train"]["blend"]] == ["a", "b"]
    assert dataset_folders(written) == [a.resolve(), b.resolve()]


@pytest.mark.parametrize("weight", [0, -1.0, "abc", "1.0", float("nan"), float("inf"), True, None])
def test_write_blend_refuses_a_weight_the_loader_would_refuse_naming_what_is_accepted(tmp_path, weight):
    folder = write_dataset(tmp_path / "d", 4)
    with pytest.raises(ValueError, match=r"blend weight of .*d must be a positive finite number, got .*; weights are relative"):
        write_blend(tmp_path / "blend.yaml", [(folder, 1.0), (folder, weight)])
    assert not (tmp_path / "blend.yaml").exists()


@pytest.mark.parametrize("weight", [np.float32(0.5), np.int64(2)], ids=["float32", "int64"])
def test_write_blend_takes_a_numpy_weight_as_the_loader_would_take_it_from_the_file(tmp_path, weight):
    # weights are often computed with numpy (counts / total); the file holds a plain float either way
    folder = write_dataset(tmp_path / "d", 4)
    written = write_blend(tmp_path / "blend.yaml", [(folder, weight)])
    assert yaml.safe_load(written.read_text())["splits"]["train"]["blend"][0]["weight"] == float(weight)


@pytest.mark.parametrize("made", ["empty", "missing"])
def test_write_blend_names_a_dataset_folder_without_shards_as_empty_not_as_unprepared(datasets, tmp_path, made):
    # a writer that wrote no sample leaves a folder without shards, which prepare_dataset refuses
    # ("no .tar shards"): "run prepare_dataset first" sent the user round in a circle
    root, (a, _, _) = datasets
    folder = tmp_path / "none"
    if made == "empty":
        folder.mkdir()
    with pytest.raises(FileNotFoundError, match=rf"{folder} holds no \.tar shards .* leave its pair out of the blend"):
        write_blend(tmp_path / "blend.yaml", [(a, 0.9), (folder, 0.1)])


def test_write_blend_names_vfm_shards_output_folder_by_its_blend_file_and_takes_that_file(datasets, tmp_path):
    # vfm shard's output folder holds bucket folders and blend.yaml, no shards of its own: it is not
    # empty, and a blend of two such outputs names their blend files (nested blends)
    root, (a, b, _) = datasets
    out = tmp_path / "shards"
    out.mkdir()
    inner = write_blend(out / "blend.yaml", [(a, 1.0), (b, 1.0)])
    with pytest.raises(FileNotFoundError, match=rf"{out} holds no \.tar shards but a blend file: pass {inner}"):
        write_blend(tmp_path / "mix.yaml", [(out, 1.0)])
    mix = write_blend(tmp_path / "mix.yaml", [(inner, 1.0), (a, 2.0)])
    assert dataset_folders(mix) == [a.resolve(), b.resolve(), a.resolve()]


def test_write_blend_tells_a_vfm_shard_bucket_without_its_index_to_run_vfm_shard_again(tmp_path):
    # "run prepare_dataset first" would index its val shards as train: the loader's hint names vfm shard
    import torch

    from tests.data.helpers import meta
    from vfm_data import ShardWriter

    bucket = tmp_path / "shards" / "32x48x5"
    for prefix in ("shard", "val"):
        with ShardWriter(bucket, prefix=prefix) as w:
            w.write(f"{prefix}0", torch.randn(4, 2, 4, 4), torch.randn(3, 8), meta())
    with pytest.raises(FileNotFoundError, match=rf"index it first: run vfm shard into {tmp_path / 'shards'} again"):
        write_blend(tmp_path / "blend.yaml", [(bucket, 1.0)])
