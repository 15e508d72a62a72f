"""A curation folder's resume state (``.state/``) names its format in ``.state/format.json``: written by
the first run into the folder; a folder curated before the marker existed reads as format 1 and gets
it; one a newer vfm curated is refused by ``vfm curate`` and ``vfm shard`` in one line naming the file,
its version and the upgrade, before anything is written. Real runs on H264 files made with PyAV."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import vfm_curator
from tests.format_versions import assert_one_line_naming
from vfm_curator.io.state_format import STATE_FORMAT
from vfm_curator.synth import make_video
from vfm_plugins.formats import FormatVersionError

SERIAL = {"run": {"runner": "serial"}}


def _curated(tmp_path: Path) -> Path:
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    out = tmp_path / "out"
    vfm_curator.curate(tmp_path / "in", out, SERIAL)
    return out


def _listing(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in sorted(folder.rglob("*"))}


def test_a_curation_folder_names_its_state_format_from_its_first_run(tmp_path):
    marker = json.loads((_curated(tmp_path) / ".state" / "format.json").read_text())
    assert marker["format_version"] == STATE_FORMAT and marker["written_by"].startswith("vfm-curator")


def test_a_folder_curated_before_the_marker_reads_as_format_1_and_gets_the_marker(tmp_path):
    out = _curated(tmp_path)
    (out / ".state" / "format.json").unlink()  # as a folder curated before today's vfm
    make_video(tmp_path / "in" / "b.mp4", [30], seed=2)
    again = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    assert (again.skipped, again.processed) == (1, 1)  # its finished video read as before
    assert json.loads((out / ".state" / "format.json").read_text())["format_version"] == 1


def test_a_folder_whose_state_a_newer_vfm_wrote_is_refused_by_curate_before_anything_is_written(tmp_path):
    out = _curated(tmp_path)
    marker = out / ".state" / "format.json"
    marker.write_text(json.dumps({"format_version": STATE_FORMAT + 1, "written_by": "vfm-curator 9.0"}))
    make_video(tmp_path / "in" / "b.mp4", [30], seed=2)
    before = _listing(out)
    with pytest.raises(FormatVersionError) as info:
        vfm_curator.curate(tmp_path / "in", out, SERIAL, redo_changed=True)
    assert_one_line_naming(str(info.value), str(marker), f"format version {STATE_FORMAT + 1}", "vfm-curator 9.0",
                           f"reads version {STATE_FORMAT}", "pip install -U vfm-curator")
    assert _listing(out) == before  # no lock file, no record, no clip


def test_a_curation_whose_state_a_newer_vfm_wrote_is_refused_by_shard_before_any_shard(tmp_path):
    out = _curated(tmp_path)
    marker = out / ".state" / "format.json"
    marker.write_text(json.dumps({"format_version": STATE_FORMAT + 1}))
    shards = tmp_path / "shards"
    with pytest.raises(FormatVersionError) as info:
        vfm_curator.shard(out, shards, tokenizer="pixel", text_encoder="hash")
    assert_one_line_naming(str(info.value), str(marker), f"format version {STATE_FORMAT + 1}", "newer vfm",
                           "pip install -U vfm-curator")
    assert not list(shards.rglob("*.tar"))


def test_a_damaged_state_marker_is_refused_naming_it(tmp_path):
    out = _curated(tmp_path)
    marker = out / ".state" / "format.json"
    marker.write_text("{not json")
    with pytest.raises(FormatVersionError, match="has no vfm curation state format version.*damaged"):
        vfm_curator.curate(tmp_path / "in", out, SERIAL)


SHARD = {"tokenizer": "pixel", "text_encoder": "hash", "require_captions": False}


def _sharded(tmp_path: Path) -> tuple[Path, Path]:
    out = _curated(tmp_path)
    shards = tmp_path / "shards"
    vfm_curator.shard(out, shards, SERIAL, **SHARD)
    return out, shards


def test_a_shards_folder_names_its_format_in_shard_config_json(tmp_path):
    _, shards = _sharded(tmp_path)
    assert json.loads((shards / "shard_config.json").read_text())["format_version"] == 1


def test_a_shards_folder_made_before_the_field_reads_as_format_1_and_gets_it(tmp_path):
    out, shards = _sharded(tmp_path)
    config = shards / "shard_config.json"
    config.write_text(json.dumps({k: v for k, v in json.loads(config.read_text()).items() if k != "format_version"}))
    again = vfm_curator.shard(out, shards, SERIAL, **SHARD)
    assert again.skipped == again.clips > 0  # resumed as the same folder: every clip already sharded
    assert json.loads(config.read_text())["format_version"] == 1


def test_a_shards_folder_a_newer_vfm_made_is_refused_before_anything_is_written(tmp_path):
    out, shards = _sharded(tmp_path)
    config = shards / "shard_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "format_version": 2}))
    before = _listing(shards)
    with pytest.raises(FormatVersionError) as info:
        vfm_curator.shard(out, shards, SERIAL, **SHARD)
    assert_one_line_naming(str(info.value), str(config), "vfm shards folder of format version 2", "newer vfm",
                           "reads version 1", "pip install -U vfm-curator")
    assert _listing(shards) == before  # no lock file, no shard, no record
