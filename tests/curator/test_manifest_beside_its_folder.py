"""A user's folder of videos named together with a manifest that captions some of them
(`vfm curate footage/ captions.jsonl`): the folder lists every video without a caption, the manifest
names a few again with one, and the caption is kept whichever input comes first."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import vfm_curator
from vfm_curator.io.inputs import expand
from vfm_curator.synth import make_video


def _footage(tmp_path):
    folder = tmp_path / "footage"
    make_video(folder / "beach walk.mp4", [30, 30], seed=1)
    make_video(folder / "sub" / "city.mp4", [30, 30], seed=2)
    manifest = tmp_path / "captions.jsonl"
    manifest.write_text(json.dumps({"path": "footage/beach walk.mp4", "caption": "waves on a beach"}) + "\n")
    return folder, manifest


@pytest.mark.parametrize("folder_first", [True, False])
def test_a_manifest_caption_is_kept_whether_the_folder_or_the_manifest_is_named_first(tmp_path, folder_first):
    folder, manifest = _footage(tmp_path)
    inputs = [str(folder), str(manifest)] if folder_first else [str(manifest), str(folder)]
    summary = vfm_curator.curate(inputs, tmp_path / "out", {"run": {"runner": "serial"}})
    assert summary.videos == 2
    clips = pq.read_table(tmp_path / "out" / "clips.parquet").to_pylist()
    captions = {(row["source"].rsplit("/", 1)[-1], row["caption"]) for row in clips}
    assert captions == {("beach walk.mp4", "waves on a beach"), ("city.mp4", None)}


def test_a_video_given_two_different_captions_is_refused_naming_both(tmp_path):
    folder, manifest = _footage(tmp_path)
    other = tmp_path / "more.csv"
    other.write_text("path,caption\nfootage/beach walk.mp4,a dog on the sand\n")
    with pytest.raises(ValueError, match="two captions.*'waves on a beach'.*'a dog on the sand'.*accepted: one caption"):
        expand([str(manifest), str(folder), str(other)])
    # the same caption twice is one caption
    other.write_text("path,caption\nfootage/beach walk.mp4,waves on a beach\n")
    assert [s.caption for s in expand([str(manifest), str(other)])] == ["waves on a beach"]


def test_vfm_curate_says_a_manifest_can_caption_the_clips_it_left_without_one(tmp_path):
    from typer.testing import CliRunner

    from vfm_cli.main import app

    folder, _ = _footage(tmp_path)
    result = CliRunner().invoke(app, ["curate", str(folder), "-o", str(tmp_path / "out"), "--runner", "serial", "--no-progress"])
    assert result.exit_code == 0, result.output
    line = next(ln for ln in result.output.splitlines() if ln.startswith("captions:"))
    assert "4 of 4 clips have none" in line and ".jsonl/.csv manifest of path and caption" in line, line


@pytest.mark.parametrize("route", ["a link to the folder", "a hard link"])
def test_a_manifest_naming_a_folders_video_by_another_path_captions_that_one_video(tmp_path, route):
    # the same file reached through a symbolic link to its folder, or by a hard link: one video, captioned
    # (by path alone it was listed twice, the folder's copy uncaptioned, and clipped twice)
    folder, manifest = _footage(tmp_path)
    if route == "a link to the folder":
        (tmp_path / "footage link").symlink_to(folder, target_is_directory=True)
        other_name = "footage link/beach walk.mp4"
    else:
        os.link(folder / "beach walk.mp4", tmp_path / "beach walk.mp4")
        other_name = "beach walk.mp4"
    manifest.write_text(json.dumps({"path": other_name, "caption": "waves on a beach"}) + "\n")
    for inputs in ([folder, manifest], [manifest, folder]):
        sources = expand([str(i) for i in inputs])
        assert sorted(((Path(s.path).name, s.caption) for s in sources), key=str) == [
            ("beach walk.mp4", "waves on a beach"), ("city.mp4", None)], sources
        # the path kept is the one named first (as for a video named twice by one path)
        first = str(folder / "beach walk.mp4") if inputs[0] == folder else str(tmp_path / other_name)
        assert first in [s.path for s in sources], sources


def test_two_folder_inputs_reaching_the_same_files_list_each_video_once(tmp_path):
    folder, _ = _footage(tmp_path)
    (tmp_path / "footage link").symlink_to(folder, target_is_directory=True)
    sources = expand([str(tmp_path / "footage link"), str(folder)])
    assert sorted(Path(s.path).name for s in sources) == ["beach walk.mp4", "city.mp4"], sources
