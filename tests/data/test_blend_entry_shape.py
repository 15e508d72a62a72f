"""A blend entry without a ``path`` (or with one that is not a string, or an entry that is not a
mapping) is a mistake in the file, not code to trust: the error names the entry, what is wrong and
what an entry looks like, with no advice to use ``--trust-dataset-code``."""

from __future__ import annotations

import pytest

from vfm_data import make_loader
from vfm_data.trust import UntrustedDatasetError

ENTRY = ("accepted: every entry names a dataset folder or blend file, e.g. {path: ../videos, weight: 0.7} "
         "(path relative to the blend file's folder, or absolute; weight optional, default 1.0)")


def _blend(tmp_path, entry: str):
    file = tmp_path / "blend.yaml"
    file.write_text("__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    blend:\n"
                    f"      - {entry}\n")
    return file


@pytest.mark.parametrize("entry, problem", [
    ("{weight: 0.5}", "splits.train.blend[0]: has no path (it has weight)"),
    ("{}", "splits.train.blend[0]: has no path (it has nothing)"),
    ("{path: 5, weight: 1.0}", "splits.train.blend[0].path: must be a dataset folder or blend file path (a non-empty "
                               "string), got int"),
    ("{path: ''}", "splits.train.blend[0].path: must be a dataset folder or blend file path (a non-empty string), "
                   "got an empty string"),
    ("../videos", "splits.train.blend[0]: must be a mapping with a path, got str"),
])
def test_a_blend_entry_without_a_usable_path_names_the_entry_and_what_an_entry_holds(tmp_path, entry, problem):
    blend = _blend(tmp_path, entry)
    with pytest.raises(UntrustedDatasetError) as info:
        make_loader(blend, patch_size=2, batch_size=2)
    message = str(info.value)
    assert message.startswith(f"{blend}: {problem}")
    assert ENTRY in message
    assert "trust-dataset-code" not in message and "trust_dataset_code" not in message


def test_an_empty_blend_list_says_what_an_entry_holds_not_to_trust_code(tmp_path):
    blend = tmp_path / "blend.yaml"
    blend.write_text("__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    blend: []\n")
    with pytest.raises(UntrustedDatasetError) as info:
        make_loader(blend, patch_size=2, batch_size=2)
    assert ENTRY in str(info.value) and "trust-dataset-code" not in str(info.value)
