"""An export's config.json carries its format version: one written before the field still loads, one
from a newer vfm is refused in one line before anything is built, and a key this vfm does not know is
named and ignored (docs/contracts.md, "Persisted formats")."""

from __future__ import annotations

import json
import warnings

import pytest

import vfm_models
from tests.format_versions import assert_one_line_naming
from vfm_models.export import CONFIG, EXPORT_FORMAT, load_export, read_meta, save_export
from vfm_plugins.formats import FormatVersionError, UnknownKeysNotice


@pytest.fixture
def export(tmp_path):
    model = vfm_models.get_family("dit").create("tiny")
    return save_export(tmp_path / "export", model, {"family": "dit", "config": model.config, "formulation": "edm"},
                       for_generation=False)  # a weights-only export: format versions concern every export


def _edit(folder, change) -> None:
    meta = json.loads((folder / CONFIG).read_text())
    change(meta)
    (folder / CONFIG).write_text(json.dumps(meta))


def test_save_export_writes_the_format_version(export):
    assert json.loads((export / CONFIG).read_text())["format_version"] == EXPORT_FORMAT


def test_an_export_written_before_the_format_version_loads_as_format_1(export):
    _edit(export, lambda m: m.pop("format_version"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no notice either: nothing in it is unknown
        _, meta = load_export(export)
    assert meta["family"] == "dit"


def test_an_export_of_a_newer_format_is_refused_naming_the_file_its_version_and_the_upgrade(export):
    # a newer format may give a key another meaning: refused before the family is looked up
    _edit(export, lambda m: m.update(format_version=EXPORT_FORMAT + 1, vfm_models_version="9.1.0", family="renamed"))
    with pytest.raises(FormatVersionError) as info:
        load_export(export)
    message = str(info.value)
    assert_one_line_naming(message, str(export / CONFIG), f"format version {EXPORT_FORMAT + 1}", "vfm-models 9.1.0",
                           "newer vfm", f"reads version {EXPORT_FORMAT}", "pip install -U vfm-models")


def test_an_unknown_key_in_an_export_of_this_format_is_named_and_ignored(export):
    _edit(export, lambda m: m.update(guidance_schedule={"kind": "linear"}))
    with pytest.warns(UnknownKeysNotice, match="guidance_schedule"):
        meta = read_meta(export)
    assert meta["family"] == "dit"


def test_a_converted_exports_keys_are_all_known(export):
    _edit(export, lambda m: m.update(converted_from={"adapter": "diffusers-dit"}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_meta(export)
