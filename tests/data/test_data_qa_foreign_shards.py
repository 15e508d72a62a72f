"""Shards vfm did not make, as a research lab brings them: WebDataset tars written with
``webdataset.TarWriter``, raw video + caption tars, ``energon prepare`` run by hand, energon's own
sample types, nested blends, empty tars and duplicate keys. Each loads, or is one error naming
what is wrong and what to run."""

from __future__ import annotations

import io
import os
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import webdataset as wds

from tests.data.helpers import quiet, write_dataset
from vfm_data import make_loader, prepare_dataset
from vfm_data.blend_file import dataset_folders
from vfm_data.errors import ShardError
from vfm_data.sample import first_sample
from vfm_data.trust import UntrustedDatasetError, check_dataset

OPTIONS = dict(patch_size=2, batch_size=2, max_seq_len=64, num_workers=0, streams=1)
BLEND = "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    blend:\n"


def _npy(array) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def _hand_written(folder: Path, n: int = 8) -> Path:
    """vfm's members written with webdataset's own TarWriter, not vfm's ShardWriter."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    with wds.TarWriter(str(folder / "part-00000.tar")) as w:
        for i in range(n):
            meta = dict(source="x.mp4", span=[0, 1], fps=24, size=[32, 32], caption=f"clip {i}", modality="video",
                        tokenizer="pixel", text_encoder="hash")
            w.write({"__key__": f"s{i:05d}", "latent.npy": _npy(rng.standard_normal((4, 2, 4, 4)).astype(np.float32)),
                     "text.npy": _npy(rng.standard_normal((3, 8)).astype(np.float32)), "json": json.dumps(meta).encode()})
    return folder


def _raw_video_tar(folder: Path) -> Path:
    """What public video datasets ship: <key>.mp4 + <key>.txt (+ .json), made with TarWriter."""
    folder.mkdir(parents=True)
    with wds.TarWriter(str(folder / "videos-00000.tar")) as w:
        for i in range(3):
            w.write({"__key__": f"v{i}", "mp4": b"\x00\x00\x00\x18ftypmp42" + bytes(64), "txt": b"a cat",
                     "json": b'{"caption": "a cat"}'})
    return folder


def _energon_prepare(folder: Path) -> None:
    """The user's own `energon prepare` (megatron-energon's CLI), as its README says to run it."""
    energon = Path(sys.executable).parent / "energon"
    subprocess.run([str(energon), "prepare", str(folder), "--non-interactive", "--split-ratio", "1,0,0",
                    "--sample-type", "CrudeWebdataset", "--no-progress"], check=True, capture_output=True, timeout=120)


def test_webdataset_tarwriter_shards_prepared_by_energon_prepare_load(tmp_path):
    folder = _hand_written(tmp_path / "wds")
    _energon_prepare(folder)
    loader = make_loader(folder, **OPTIONS)
    assert {k for _ in range(4) for k in next(loader).keys} <= {f"s{i:05d}" for i in range(8)}


def test_a_folder_of_vfm_tars_without_nv_meta_names_the_prepare_commands_not_trust(tmp_path):
    folder = _hand_written(tmp_path / "wds")
    with pytest.raises(UntrustedDatasetError) as err:
        check_dataset(folder)
    assert "energon prepare" in str(err.value) and "prepare_dataset" in str(err.value)
    assert "trust" not in str(err.value)
    with pytest.raises(ShardError, match="energon prepare"):  # what vfm train probes first
        first_sample(folder)


def test_raw_video_tars_name_the_curate_and_shard_commands_prepared_or_not(tmp_path):
    folder = _raw_video_tar(tmp_path / "videos")
    with pytest.raises(UntrustedDatasetError) as err:
        check_dataset(folder)
    assert "raw media (mp4)" in str(err.value) and "vfm curate" in str(err.value) and "vfm shard" in str(err.value)
    assert "trust" not in str(err.value)
    _energon_prepare(folder)
    check_dataset(folder)  # energon's CrudeWebdataset index is what vfm accepts
    with pytest.raises(ShardError, match=r"raw media \(mp4\).*vfm curate"):
        first_sample(folder, warn=False)


def test_an_energon_sample_type_with_a_field_map_is_refused_naming_crude_webdataset_not_trust(tmp_path):
    folder = _hand_written(tmp_path / "wds")
    _energon_prepare(folder)
    (folder / ".nv-meta" / "dataset.yaml").write_text(
        "sample_type:\n  __module__: megatron.energon\n  __class__: CaptioningSample\nfield_map:\n  image: jpg\n  caption: txt\n")
    with pytest.raises(UntrustedDatasetError) as err:
        check_dataset(folder)
    assert "CaptioningSample" in str(err.value) and "CrudeWebdataset" in str(err.value) and "trust" not in str(err.value)
    (folder / ".nv-meta" / "dataset.yaml").write_text("sample_type:\n  __module__: os\n  __class__: system\nfield_map: {}\n")
    with pytest.raises(UntrustedDatasetError, match="os.system.*trust-dataset-code"):  # code: still the opt-in
        check_dataset(folder)


def test_two_nested_blends_naming_the_same_dataset_load_and_a_real_cycle_is_refused(tmp_path):
    a = write_dataset(tmp_path / "a", 8, prefix="a")
    b = write_dataset(tmp_path / "b", 8, prefix="b", seed=1)
    (tmp_path / "inner.yaml").write_text(BLEND + "      - {weight: 2, path: a}\n      - {weight: 1, path: b}\n")
    (tmp_path / "outer.yaml").write_text(BLEND + "      - {weight: 1, path: inner.yaml}\n      - {weight: 1, path: b}\n")
    check_dataset(tmp_path / "outer.yaml")
    assert dataset_folders(tmp_path / "outer.yaml") == [a.resolve(), b.resolve(), b.resolve()]
    keys = {k[0] for _ in range(6) for k in next(make_loader(tmp_path / "outer.yaml", **OPTIONS)).keys}
    assert keys <= {"a", "b"}
    (tmp_path / "loop.yaml").write_text(BLEND + "      - {weight: 1, path: a}\n      - {weight: 1, path: loop.yaml}\n")
    with pytest.raises(UntrustedDatasetError, match="cycle") as err:
        check_dataset(tmp_path / "loop.yaml")
    assert "trust" not in str(err.value)


def test_a_blend_weight_of_zero_says_weights_are_relative_not_trust(tmp_path):
    write_dataset(tmp_path / "a", 8, prefix="a")
    (tmp_path / "zero.yaml").write_text(BLEND + "      - {weight: 0, path: a}\n")
    with pytest.raises(UntrustedDatasetError, match="relative.*remove its entry") as err:
        check_dataset(tmp_path / "zero.yaml")
    assert "trust" not in str(err.value)


def test_prepare_dataset_raises_naming_a_duplicate_key_instead_of_exiting(tmp_path):
    folder = _hand_written(tmp_path / "wds")
    with tarfile.open(folder / "part-00000.tar") as src, tarfile.open(folder / "part-00001.tar", "w") as dst:
        for member in src:
            dst.addfile(member, src.extractfile(member))
    with pytest.raises(ValueError, match=r"'s00000' appears twice \(in part-00000.tar and part-00001.tar\).*--fix-duplicates"):
        quiet(prepare_dataset, folder)


def test_prepare_dataset_names_an_empty_tar(tmp_path):
    folder = _hand_written(tmp_path / "wds")
    tarfile.open(folder / "part-00001.tar", "w").close()
    with pytest.raises(ValueError, match="part-00001.tar has no samples.*remove the empty tar"):
        quiet(prepare_dataset, folder)


def test_another_energon_assertion_is_not_reported_as_an_empty_tar(tmp_path, monkeypatch):
    # energon's other assertions are not vfm's to word: only "has no samples" means an empty tar
    from megatron.energon.flavors.webdataset.base_webdataset import BaseWebdatasetFactory

    def fails(*args, **kwargs):
        raise AssertionError("some other energon check")

    monkeypatch.setattr(BaseWebdatasetFactory, "prepare_dataset", staticmethod(fails))
    with pytest.raises(AssertionError, match="some other energon check"):
        quiet(prepare_dataset, _hand_written(tmp_path / "wds"))


def test_a_folder_whose_preparation_did_not_finish_names_the_prepare_commands_not_trust(tmp_path):
    folder = write_dataset(tmp_path / "a", 4)
    (folder / ".nv-meta" / "dataset.yaml").unlink()
    with pytest.raises(UntrustedDatasetError, match=r"did not finish.*energon prepare .*--sample-type CrudeWebdataset, "
                       r"or vfm_data.prepare_dataset\(") as err:
        check_dataset(folder)
    assert "trust" not in str(err.value)


CHECK = "import sys\nfrom vfm_data.trust import check_dataset\ntry:\n    check_dataset(sys.argv[1])\nexcept ValueError as e:\n    print(e)\n"


def test_an_unprepared_folder_whose_tar_is_a_fifo_or_a_link_outside_is_described_without_reading_it(tmp_path):
    """A folder from elsewhere holding ``part-00000.tar`` as a named pipe (opening it waits for a writer
    forever) or as a link to a tar outside it: the hint names the folder, it does not read that file."""
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "part-00000.tar")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "part-00000.tar").symlink_to(_raw_video_tar(tmp_path / "elsewhere") / "videos-00000.tar")
    for folder in (fifo, linked):
        result = subprocess.run([sys.executable, "-c", CHECK, str(folder)], capture_output=True, text=True, timeout=30)
        assert f"{folder} has 1 .tar shard but no energon index" in result.stdout, result.stdout + result.stderr
        assert "mp4" not in result.stdout


FIRST = "import sys\nfrom vfm_data.sample import first_sample\ntry:\n    first_sample(sys.argv[1])\nexcept Exception as e:\n    print(e)\n"


def test_a_named_pipe_among_a_prepared_folders_shards_is_named_not_opened(tmp_path):
    # opening a named pipe waits for a writer forever: a shard folder from elsewhere must not hang vfm
    folder = write_dataset(tmp_path / "a", 4)
    os.mkfifo(folder / "0000-pipe.tar")  # sorts before the real shards, so it is the first one looked at
    result = subprocess.run([sys.executable, "-c", FIRST, str(folder)], capture_output=True, text=True, timeout=60)
    assert "0000-pipe.tar is not a regular file" in result.stdout, result.stdout + result.stderr
