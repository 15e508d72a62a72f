"""A blend file energon's YAML reader cannot read (an empty value, an empty file) is refused naming the
key and what is accepted, not energon's ``AttributeError: 'NoneType' object has no attribute 'tobytes'``
with advice to trust its code (trusting would not make energon read it)."""

from __future__ import annotations

import pytest

from tests.data.helpers import write_dataset
from vfm_data.trust import UntrustedDatasetError, check_dataset

BLEND = "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    blend:\n"


def test_a_blend_with_an_empty_list_names_the_key(tmp_path):
    (tmp_path / "b.yaml").write_text(BLEND)
    with pytest.raises(UntrustedDatasetError, match=r"b.yaml: splits.train.blend: has no value") as caught:
        check_dataset(tmp_path / "b.yaml")
    assert "tobytes" not in str(caught.value) and "trust-dataset-code" not in str(caught.value)


def test_an_empty_blend_file_is_named_empty(tmp_path):
    (tmp_path / "b.yaml").write_text("")
    with pytest.raises(UntrustedDatasetError, match=r"b.yaml: <file>: empty.*accepted: the YAML vfm writes"):
        check_dataset(tmp_path / "b.yaml")


def test_yaml_that_is_not_yaml_keeps_the_parsers_words(tmp_path):
    write_dataset(tmp_path / "d", 2)
    (tmp_path / "b.yaml").write_text(BLEND + "      - path: [unclosed\n")
    with pytest.raises(UntrustedDatasetError, match=r"<file>: not readable YAML"):
        check_dataset(tmp_path / "b.yaml")
