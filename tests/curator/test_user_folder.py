"""A user's own folder curated as it is (serial runner): failures say what the file is and which
option to change, in failures.jsonl and in the report's advice."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import vfm_curator
from tests.curator.local_http import ChatServer
from vfm_cli.main import app
from vfm_curator.io.inputs import expand
from vfm_curator.synth import make_video

from . import messy_inputs as messy

SERIAL = {"run": {"runner": "serial"}, "options": {"split": {"min_clip_s": 0.5}}}


def _failures(out: Path) -> dict[str, dict]:
    return {Path(r["source"]).name: r for r in map(json.loads, (out / "failures.jsonl").read_text().splitlines())}


def test_links_that_point_at_each_other_are_named_a_loop_not_a_missing_file(tmp_path):
    src = tmp_path / "in"
    make_video(src / "good.mp4", [30], width=64, height=48)
    (src / "a.mp4").symlink_to("b.mp4")
    (src / "b.mp4").symlink_to("a.mp4")
    (src / "dead.mp4").symlink_to("gone.mp4")
    vfm_curator.curate([str(src)], tmp_path / "out", SERIAL)
    failures = _failures(tmp_path / "out")
    assert sorted(failures) == ["a.mp4", "b.mp4", "dead.mp4"]
    assert failures["a.mp4"]["reason"].startswith("symbolic link loop: it points to 'b.mp4'")
    assert "does not exist" not in failures["a.mp4"]["reason"]  # b.mp4 is there: it is a link back
    assert failures["dead.mp4"]["reason"] == "broken symbolic link: it points to 'gone.mp4', which does not exist"
    with pytest.raises(ValueError, match=r"is a symbolic link loop: it points to 'b\.mp4'"):
        expand([str(src / "a.mp4")])


def test_a_one_frame_video_names_the_decode_option_and_following_it_keeps_the_frame(tmp_path):
    messy.write(tmp_path / "in" / "still.mp4", 1)
    with pytest.raises(vfm_curator.NothingWrittenError):
        vfm_curator.curate([str(tmp_path / "in")], tmp_path / "out", SERIAL)
    failure = _failures(tmp_path / "out")["still.mp4"]
    assert failure["kind"] == "too-short" and failure["cause"] == "config"
    assert "under decode.min_frames=2" in failure["reason"]
    # the report's advice for the kind names the option that failed it, not only split.min_clip_s
    advice = (tmp_path / "out" / "report.html").read_text().split('data-kind="too-short"')[1].split("</tr>")[0]
    assert "decode.min_frames" in advice
    keep = {"run": {"runner": "serial"}, "options": {"decode": {"min_frames": 1}, "split": {"min_clip_s": 0}}}
    vfm_curator.curate([str(tmp_path / "in")], tmp_path / "out", keep)  # a changed config retries it
    rows = pq.read_table(tmp_path / "out" / "clips.parquet").to_pylist()
    assert [(r["num_frames"], r["width"], r["height"]) for r in rows] == [(1, 64, 48)]


def test_a_file_still_being_copied_while_curated_is_named_and_redo_changed_clips_it_whole(tmp_path):
    whole = messy.write(tmp_path / "src" / "take.ts", 72, fmt="mpegts").read_bytes()
    video = tmp_path / "in" / "take.ts"
    video.parent.mkdir()
    video.write_bytes(whole[: len(whole) // 2 // 188 * 188])  # half copied, cut at a TS packet

    def rest_arrives(n, body):  # the copy finishes while the run captions the first half's clip
        if video.stat().st_size < len(whole):
            with open(video, "ab") as fh:
                fh.write(whole[video.stat().st_size:])
        return 200, "a drifting pattern", 0.0

    server = ChatServer(rest_arrives)
    config = tmp_path / "run.json"
    config.write_text(json.dumps({"options": {"split": {"min_clip_s": 0.5}, "caption": {
        "captioner": "endpoint", "captioner_options": {"url": server.url, "model": "m"}}}}))
    out = tmp_path / "out"

    def curate(*extra):
        result = CliRunner().invoke(app, ["curate", str(tmp_path / "in"), "-o", str(out), "--config", str(config),
                                          "--runner", "serial", "--no-progress", *extra])
        assert result.exit_code == 0, result.output
        frames = sum(r["num_frames"] for r in pq.read_table(out / "clips.parquet").to_pylist())
        return " ".join(result.output.split()), frames

    try:
        said, frames = curate()
        assert frames < 72  # clipped from the half that was there when it was read
        assert "changed while curated: 1 video changed while it was curated" in said
        assert "take.ts" in said and "--redo-changed" in said
        assert json.loads((out / "summary.json").read_text())["changed_while_curated"] == [str(video)]
        said, frames = curate()  # the next run names it as a changed input and keeps the clips
        assert "inputs changed: 1 finished video changed" in said and "changed while curated" not in said
        said, frames = curate("--redo-changed")
        assert frames == 72 and "changed while curated" not in said
    finally:
        server.close()


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder this process cannot create files in: a read-only bind mount for root (root ignores
    permission bits), a folder without write permission for anyone else."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    if subprocess.run(["mount", "--bind", "-o", "ro", str(folder), str(folder)], capture_output=True).returncode != 0:
        pytest.skip("root without a read-only folder: this machine refuses a read-only bind mount")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_an_output_folder_that_cannot_be_written_is_one_line_before_any_work(tmp_path, read_only_folder):
    make_video(tmp_path / "in" / "a.mp4", [30], width=64, height=48)
    result = CliRunner().invoke(app, ["curate", str(tmp_path / "in"), "-o", str(read_only_folder / "out"),
                                      "--runner", "serial", "--no-progress"])
    assert result.exit_code == 1, result.output
    why = "is on a read-only file system" if os.geteuid() == 0 else "is not writable by this user"
    assert result.output.strip() == (f"error: -o {read_only_folder / 'out'}: {read_only_folder} {why}; accepted: a "
                                     "folder where this user can create files")
    vfm_curator.curate([str(tmp_path / "in")], tmp_path / "clips", SERIAL)
    with pytest.raises(ValueError, match=rf"-o {read_only_folder / 'shards'}: {read_only_folder} {why}"):
        vfm_curator.shard(tmp_path / "clips", read_only_folder / "shards", tokenizer="pixel", text_encoder="hash",
                          require_captions=False)


def test_the_copies_line_prints_a_file_name_control_character_escaped(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [30], width=64, height=48)
    (tmp_path / "in" / "b\rcopy.mp4").write_bytes((tmp_path / "in" / "a.mp4").read_bytes())  # a CR would overwrite the line
    result = CliRunner().invoke(app, ["curate", str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--runner", "serial",
                                      "--no-progress"])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("copies: "))
    assert "b\\rcopy.mp4 = " in line and "\r" not in line


def test_a_file_moved_away_after_it_was_read_is_not_named_changed_while_curated(tmp_path):
    """Its clips hold the whole file; "grew or was rewritten, re-run with --redo-changed" would
    send the user after a change that is not there (and a re-run has no file to redo)."""
    video = tmp_path / "in" / "take.mp4"
    make_video(video, [30], width=64, height=48)

    def moved_away(n, body):  # an ingest job archives the file while the run captions its clip
        video.unlink(missing_ok=True)
        return 200, "a drifting pattern", 0.0

    server = ChatServer(moved_away)
    try:
        summary = vfm_curator.curate([str(tmp_path / "in")], tmp_path / "out", {**SERIAL, "options": {
            **SERIAL["options"], "caption": {"captioner": "endpoint", "captioner_options": {"url": server.url, "model": "m"}}}})
    finally:
        server.close()
    assert summary.processed == 1 and summary.clips == 1 and not video.exists()
    assert summary.changed_while_curated == [] and summary.changed_while_curated_line() is None


def test_a_chain_of_links_ending_at_a_missing_file_names_the_file_that_is_missing(tmp_path):
    """``a.mp4 -> b.mp4 -> gone.mp4``: b.mp4 is there (a link), so "b.mp4 does not exist" misleads."""
    src = tmp_path / "in"
    make_video(src / "good.mp4", [30], width=64, height=48)
    (src / "b.mp4").symlink_to("gone.mp4")
    (src / "a.mp4").symlink_to("b.mp4")
    vfm_curator.curate([str(src)], tmp_path / "out", SERIAL)
    reason = _failures(tmp_path / "out")["a.mp4"]["reason"]
    missing = os.path.realpath(src / "gone.mp4")
    assert reason == f"broken symbolic link: it points to 'b.mp4', a link that leads to {missing!r}, which does not exist"
    assert _failures(tmp_path / "out")["b.mp4"]["reason"] == "broken symbolic link: it points to 'gone.mp4', which does not exist"
