"""A directory input leaves out dot-files and dot-folders (macOS ``._clip.mp4`` resource forks that
are no videos, ``.Trash``...), as globs do, so they neither fail as unusable inputs nor add clips;
a dot-file named explicitly is still read."""

from __future__ import annotations

import json
import os

from vfm_curator.api import curate
from vfm_curator.io.inputs import expand
from vfm_curator.synth import make_video


def test_a_directory_input_skips_dot_files_and_dot_folders(tmp_path):
    src = tmp_path / ".footage"  # the named directory itself may be hidden: only what is under it counts
    make_video(src / "a.mp4", [24, 24], seed=1)
    (src / "._a.mp4").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        " + b"\x00" * 64)  # AppleDouble
    make_video(src / ".Trash-1000" / "files" / "old.mp4", [24], seed=2)
    assert [os.path.relpath(s.path, src) for s in expand([str(src)])] == ["a.mp4"]
    assert [os.path.relpath(s.path, src) for s in expand([str(src / "._a.mp4")])] == ["._a.mp4"]  # named: read
    summary = curate(src, tmp_path / "out", {"run": {"runner": "serial"}})
    assert (summary.videos, summary.clips, summary.failures) == (1, 2, 0)
    assert (tmp_path / "out" / "failures.jsonl").read_text() == ""
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["videos"] == 1


def test_a_folder_without_videos_is_an_error_naming_the_names_searched_for(tmp_path):
    import pytest

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "notes.txt").write_text("no video here")
    (tmp_path / "in" / "take1.video").write_bytes(b"\0" * 16)
    with pytest.raises(ValueError, match=r"no video found in .*in; left out: 2 files not named like a video \(\.txt 1, "
                                         r"\.video 1\); .*: a folder is searched .* \(\.mp4, \.mov, .* more, any letter "
                                         r"case\); name other files one by one or in a \.jsonl/\.csv manifest"):
        curate([str(tmp_path / "in")], tmp_path / "out", {"run": {"runner": "serial"}})
