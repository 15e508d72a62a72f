"""The one format-version check every persisted format uses (vfm_plugins.formats): a newer version is
refused in one line naming the file, its version, the versions read and what to do; a missing one reads
as the version files had before the field; unknown keys of a readable file are named and ignored."""

from __future__ import annotations

import warnings

import pytest

from tests.format_versions import assert_one_line_naming
from vfm_plugins.formats import (
    FormatVersionError, UnknownKeysNotice, check_format_version, check_json_format, ignore_unknown_keys,
)


def _check(found, **kw):
    return check_format_version(found, where="/x/config.json", what="vfm export", current=2, package="vfm-models", **kw)


def test_a_newer_format_version_is_refused_naming_the_file_its_version_the_versions_read_and_the_upgrade():
    with pytest.raises(FormatVersionError) as info:
        _check(3, writer="vfm-models 9.0")
    message = str(info.value)
    assert_one_line_naming(message, "/x/config.json", "format version 3", "vfm-models 9.0", "reads version 1 to 2",
                           "newer vfm", "pip install -U vfm-models")


def test_a_missing_format_version_reads_as_the_version_files_had_before_the_field():
    assert _check(None, missing=1) == 1
    with pytest.raises(FormatVersionError, match="has no vfm export format version"):
        _check(None)


def test_an_older_format_version_no_longer_read_says_what_remakes_it():
    with pytest.raises(FormatVersionError, match="older vfm.*re-export it"):
        _check(1, oldest=2, older_fix="re-export it")
    assert _check(1) == 1


@pytest.mark.parametrize("found", [0, -1, True, 1.0, "1", [1]])
def test_a_format_version_that_is_not_a_whole_number_from_1_is_refused(found):
    with pytest.raises(FormatVersionError, match="must be a whole number >= 1"):
        _check(found)


def test_the_error_class_can_be_a_packages_own_subclass():
    class Mine(FormatVersionError):
        pass

    with pytest.raises(Mine):
        _check(5, error=Mine)


def test_unknown_keys_are_named_in_one_notice_and_ignored():
    with pytest.warns(UnknownKeysNotice, match=r"/x/config.json: ignoring 'b', 'c'"):
        assert ignore_unknown_keys({"a": 1, "c": 2, "b": 3}, ["a"], where="/x/config.json", what="vfm export") == ["b", "c"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ignore_unknown_keys({"a": 1}, ["a", "z"], where="w", what="x") == []


def test_a_readable_format_version_is_checked_without_looking_up_the_installed_package(monkeypatch):
    # shards check every sample's version: importlib.metadata scans the installed packages (~0.2 ms a call),
    # so it is looked up only for the message of a refusal
    from vfm_plugins import formats

    looked_up = []
    monkeypatch.setattr(formats.metadata, "version", lambda name: looked_up.append(name) or "0.0")
    assert _check(None, missing=1) == 1 and _check(2) == 2 and _check(1) == 1
    assert looked_up == []
    with pytest.raises(FormatVersionError, match=r"vfm-models 0\.0"):
        _check(3)


@pytest.mark.parametrize("writer", ["vfm-models 9.0\nTraceback", "x" * 200, 9, None])
def test_a_writer_the_file_names_unfit_for_one_line_is_left_out_of_the_refusal(writer):
    # the writer comes from the file (a manifest's written_by, an export's vfm_models_version): anything at all
    with pytest.raises(FormatVersionError) as info:
        _check(3, writer=writer)
    assert_one_line_naming(str(info.value), "format version 3", "written by a newer vfm;", "pip install -U vfm-models")


def test_the_unknown_keys_of_one_file_are_named_once_however_often_it_is_read(tmp_path):
    # vfm export and train's init_from read an export's config.json more than once
    where = str(tmp_path / "config.json")
    with pytest.warns(UnknownKeysNotice) as caught:
        for _ in range(3):
            assert ignore_unknown_keys({"a": 1, "b": 2}, ["a"], where=where, what="vfm export") == ["b"]
    assert len(caught) == 1
    with pytest.warns(UnknownKeysNotice, match="'c'"):  # other keys in it (the file changed): named again
        ignore_unknown_keys({"a": 1, "c": 2}, ["a"], where=where, what="vfm export")


def test_a_json_files_format_is_read_and_checked_by_one_rule_for_every_such_file(tmp_path):
    """One rule for the JSON files that name their format (a curation's state marker, a shards folder's
    shard_config.json): no file reads as none, an object without the field as ``missing`` (or is refused
    without one), a damaged file is refused as one without a version, a newer one names its writer."""
    path = tmp_path / "marker.json"
    check = lambda **kw: check_json_format(path, what="vfm shards folder", current=1, package="vfm-curator", **kw)
    assert check(missing=1) is None
    path.write_text('{"other": 1}')
    assert check(missing=1) == 1
    with pytest.raises(FormatVersionError, match="has no vfm shards folder format version"):
        check()
    for damaged in ('{"format_version": 1', "[1]"):
        path.write_text(damaged)
        with pytest.raises(FormatVersionError, match="or it is damaged"):
            check(missing=1)
    path.write_text('{"format_version": 2, "written_by": "vfm-curator 9.0"}')
    with pytest.raises(FormatVersionError) as info:
        check(missing=1)
    assert_one_line_naming(str(info.value), str(path), "format version 2", "vfm-curator 9.0", "pip install -U vfm-curator")
