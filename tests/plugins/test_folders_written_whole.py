"""vfm_plugins.folders: a folder written aside and renamed into place whole (vfm train's previews)."""

from __future__ import annotations

import pytest

from vfm_plugins.folders import remove_leftover_folders, written_whole


def _names(folder):
    return sorted(p.name for p in folder.iterdir())


def test_a_folder_written_whole_replaces_an_earlier_one_and_leaves_nothing_beside_it(tmp_path):
    out = tmp_path / "step_00000002"
    out.mkdir()
    (out / "0002.mp4").write_text("an earlier attempt's")
    with written_whole(out) as folder:
        assert folder.name == out.name and folder.parent.name.startswith(".step_00000002.writing-")
        (folder / "0000.mp4").write_text("new")
    assert _names(out) == ["0000.mp4"] and _names(tmp_path) == ["step_00000002"]


def test_a_block_that_raises_leaves_the_earlier_folder_as_it_was_and_nothing_beside_it(tmp_path):
    out = tmp_path / "step_00000002"
    out.mkdir()
    (out / "0000.mp4").write_text("earlier")
    with pytest.raises(RuntimeError, match="out of memory"):
        with written_whole(out) as folder:
            (folder / "0000.mp4").write_text("half")
            raise RuntimeError("out of memory")
    assert (out / "0000.mp4").read_text() == "earlier" and _names(tmp_path) == ["step_00000002"]


def test_leftover_folders_are_removed_but_a_link_named_like_one_is_left_alone(tmp_path):
    out = tmp_path / "step_00000002"
    (tmp_path / ".step_00000002.writing-0123abcd" / "step_00000002").mkdir(parents=True)
    (tmp_path / ".step_00000002.replaced-89abcdef").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / ".step_00000002.writing-fedcba98").symlink_to(tmp_path / "elsewhere")
    (tmp_path / ".step_00000003.writing-0123abcd").mkdir()  # another step's: not this folder's leftover
    removed = remove_leftover_folders(out)
    assert sorted(p.name for p in removed) == [".step_00000002.replaced-89abcdef", ".step_00000002.writing-0123abcd"]
    assert _names(tmp_path) == [".step_00000002.writing-fedcba98", ".step_00000003.writing-0123abcd", "elsewhere"]
