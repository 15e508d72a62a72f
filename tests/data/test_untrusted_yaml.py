"""YAML python tags in a shard folder's or blend's metadata: energon's YAML reader (rapidyaml) builds
no Python object from ``!!python/...`` (the tag is dropped, the value kept), and the check refuses
what is left as an object name that is not a string, one line naming the file and key; nothing runs."""

from __future__ import annotations

import shutil

import pytest

from vfm_data import make_loader, write_blend
from vfm_data.trust import UntrustedDatasetError

TAG = "!!python/object/apply:os.system ['touch {marker}']"


@pytest.fixture
def dataset(small_dataset, tmp_path):
    return shutil.copytree(small_dataset, tmp_path / "data")


def test_a_python_tag_as_the_dataset_class_is_refused_and_runs_nothing(dataset, tmp_path):
    marker = tmp_path / "marker"
    (dataset / ".nv-meta" / "dataset.yaml").write_text(f"__module__: megatron.energon\n__class__: {TAG.format(marker=marker)}\n")
    with pytest.raises(UntrustedDatasetError, match=r"dataset\.yaml: __class__: names the Python object "
                                                     r"megatron\.energon\.\['touch .*marker'\] to build or call"):
        make_loader(dataset, patch_size=2, batch_size=2)
    assert not marker.exists()


def test_a_python_tag_in_a_blend_is_refused_and_runs_nothing(dataset, tmp_path):
    marker = tmp_path / "marker"
    blend = write_blend(tmp_path / "blend.yaml", [(dataset, 1.0)])
    blend.write_text(blend.read_text().replace("__class__: MetadatasetV2", f"__class__: {TAG.format(marker=marker)}"))
    with pytest.raises(UntrustedDatasetError, match=r"blend\.yaml: __class__: names the Python object"):
        make_loader(blend, patch_size=2, batch_size=2)
    assert not marker.exists()
