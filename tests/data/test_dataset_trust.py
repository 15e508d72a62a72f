"""Shard folders and blend files are data: metadata that names Python objects or code to run is
refused, naming the file and the key, before energon reads it; a marker file proves nothing ran.
``trust_dataset_code=True`` is the opt-in."""

from __future__ import annotations

import shutil

import pytest
import yaml

from tests.data.helpers import write_dataset
from vfm_data import make_loader, write_blend
from vfm_data.trust import UntrustedDatasetError, check_dataset

OPTIONS = dict(patch_size=2, batch_size=2, max_seq_len=16, packing_buffer=8)


def _touch(marker) -> dict:
    return {"__module__": "subprocess", "__function__": "run", "args": ["touch", str(marker)]}


@pytest.fixture
def dataset(small_dataset, tmp_path):
    """A private copy of a dataset written by vfm's ShardWriter + prepare_dataset."""
    return shutil.copytree(small_dataset, tmp_path / "data")


def _write_yaml(path, doc) -> None:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def _refused(path, match: str):
    with pytest.raises(UntrustedDatasetError, match=match) as info:
        loader = make_loader(path, **OPTIONS)
        next(loader)  # energon would have run the code by the first batch at the latest
    return info.value


def test_what_vfm_writes_passes_the_check(dataset, tmp_path):
    check_dataset(dataset)
    check_dataset(write_blend(tmp_path / "blend.yaml", [(dataset, 1.0)]))
    check_dataset({"__module__": "megatron.energon", "__class__": "MetadatasetV2",
                   "splits": {"train": {"blend": [{"weight": 1.0, "path": str(dataset)}]}}})


def test_dataset_yaml_naming_an_object_is_refused_and_runs_nothing(dataset, tmp_path):
    marker = tmp_path / "marker"
    _write_yaml(dataset / ".nv-meta" / "dataset.yaml", {"__module__": "megatron.energon", "__class__": "CrudeWebdataset",
                                                         "subflavors": {"x": _touch(marker)}})
    err = _refused(dataset, r"dataset\.yaml: subflavors\.x: names the Python object subprocess\.run")
    assert "--trust-dataset-code" in str(err)
    assert not marker.exists()


def test_dataset_yaml_that_is_itself_a_call_is_refused(dataset, tmp_path):
    marker = tmp_path / "marker"
    _write_yaml(dataset / ".nv-meta" / "dataset.yaml", _touch(marker))
    _refused(dataset, r"dataset\.yaml: __function__: names the Python object subprocess\.run")
    assert not marker.exists()


def test_blend_subflavor_naming_an_object_is_refused_and_runs_nothing(dataset, tmp_path):
    marker = tmp_path / "marker"
    blend = write_blend(tmp_path / "blend.yaml", [(dataset, 1.0)])
    doc = yaml.safe_load(blend.read_text())
    doc["splits"]["train"]["blend"][0]["subflavors"] = {"x": _touch(marker)}
    _write_yaml(blend, doc)
    _refused(blend, r"blend\.yaml: splits\.train\.blend\[0\]\.subflavors\.x: names the Python object subprocess\.run")
    assert not marker.exists()


def test_sample_loader_file_function_is_refused_and_runs_nothing(dataset, tmp_path):
    marker = tmp_path / "marker"
    meta = dataset / ".nv-meta"
    (meta / "loader.py").write_text(f"open({str(marker)!r}, 'w').close()\n"
                                    "def fn(raw):\n    return raw\n\ndef parts(name):\n    return True\n")
    _write_yaml(meta / "dataset.yaml", {"sample_loader": "loader.py:fn", "part_filter": "loader.py:parts",
                                         "sample_type": {"__module__": "megatron.energon", "__class__": "CaptioningSample"}})
    _refused(dataset, r"dataset\.yaml: sample_loader: names code for energon to run \('loader\.py:fn'\)")
    assert not marker.exists()


def test_a_dataset_inside_a_nested_blend_is_checked_too(dataset, tmp_path):
    marker = tmp_path / "marker"
    _write_yaml(dataset / ".nv-meta" / "dataset.yaml", {"__module__": "megatron.energon", "__class__": "CrudeWebdataset",
                                                         "subflavors": {"x": _touch(marker)}})
    inner = write_blend(tmp_path / "inner.yaml", [(dataset, 1.0)])
    outer = tmp_path / "outer.yaml"
    _write_yaml(outer, {"__module__": "megatron.energon", "__class__": "MetadatasetV2",
                        "splits": {"train": {"blend": [{"weight": 1.0, "path": inner.name}]}}})
    _refused(outer, r"data/\.nv-meta/dataset\.yaml: subflavors\.x: names the Python object subprocess\.run")
    assert not marker.exists()


@pytest.mark.parametrize("edit, match", [
    (lambda doc: doc.update(sample_type="x"), r"dataset\.yaml: sample_type: unknown key \(vfm writes only __class__, __module__\)"),
    (lambda doc: doc.update(__class__="StandardWebdatasetFactory"),
     r"dataset\.yaml: __class__: names the Python object megatron\.energon\.StandardWebdatasetFactory to build or call; "
     r"vfm writes only megatron\.energon\.CrudeWebdataset here"),
])
def test_dataset_yaml_other_than_vfms_is_refused_naming_the_key(dataset, edit, match):
    path = dataset / ".nv-meta" / "dataset.yaml"
    doc = yaml.safe_load(path.read_text())
    edit(doc)
    _write_yaml(path, doc)
    with pytest.raises(UntrustedDatasetError, match=match):
        check_dataset(dataset)


def test_unknown_blend_keys_and_extra_meta_yaml_are_refused(dataset, tmp_path):
    blend = write_blend(tmp_path / "blend.yaml", [(dataset, 1.0)])
    doc = yaml.safe_load(blend.read_text())
    doc["splits"]["train"]["blend"][0]["dataset_config"] = "other.yaml"
    _write_yaml(blend, doc)
    with pytest.raises(UntrustedDatasetError, match=r"splits\.train\.blend\[0\]\.dataset_config: unknown key"):
        check_dataset(blend)
    _write_yaml(dataset / ".nv-meta" / "other.yaml", {"__module__": "megatron.energon", "__class__": "CrudeWebdataset"})
    with pytest.raises(UntrustedDatasetError, match=r"other\.yaml: <file>: vfm writes no such file"):
        check_dataset(dataset)


def test_trust_dataset_code_loads_an_ordinary_dataset_with_a_warning(dataset):
    with pytest.warns(UserWarning, match="trusting the dataset code"):
        loader = make_loader(dataset, trust_dataset_code=True, **OPTIONS)
    assert len(next(loader).keys) > 0


@pytest.mark.parametrize("weights, key, match", [
    ((1e308, 1e308), r"splits\.train\.blend", r"weights sum to inf"),
    ((1.0, 1e-320), r"splits\.train\.blend\[1\]\.weight", r"weight 1e-320 is a share of 0 of the weights' sum \(1\.0\)"),
])
def test_blend_weights_whose_shares_energon_cannot_take_are_refused_naming_the_key(dataset, tmp_path, weights, key, match):
    """Each weight is positive and finite, but energon divides them by their sum and draws by float32 shares:
    an inf sum ended in energon's bare ``AssertionError: All blending weights must be > 0`` naming no file, a
    share of 0 in float32 was never drawn, without a word."""
    other = shutil.copytree(dataset, tmp_path / "other")
    blend = write_blend(tmp_path / "blend.yaml", [(dataset, 1.0), (other, 1.0)])
    doc = yaml.safe_load(blend.read_text())
    for entry, weight in zip(doc["splits"]["train"]["blend"], weights):
        entry["weight"] = weight
    _write_yaml(blend, doc)
    error = _refused(blend, rf"{key}: {match}")
    assert str(blend) in str(error) and "accepted: positive weights whose sum is a finite number" in str(error)
