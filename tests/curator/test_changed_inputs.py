"""A re-run into a folder tells what changed in its inputs since they were clipped: a video is known
by its path, so without the record of what each input was, a file replaced in place was skipped with
clips of the old one, and a moved folder was clipped again (each clip twice in clips.parquet)."""

from __future__ import annotations

import os
import shutil

import pyarrow.parquet as pq
from typer.testing import CliRunner

import vfm_curator
from tests.curator.moved_folder import moved_and_recaptioned
from vfm_cli.main import app
from vfm_curator.synth import make_video

SERIAL = {"run": {"runner": "serial"}}


def _rows(out) -> int:
    return pq.read_table(out / "clips.parquet").num_rows


def test_a_file_replaced_at_its_path_is_named_as_changed_and_a_touched_one_is_not(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    make_video(tmp_path / "in" / "b.mp4", [30], seed=2)
    out = tmp_path / "out"
    vfm_curator.curate(tmp_path / "in", out, SERIAL)
    os.utime(tmp_path / "in" / "b.mp4", ns=(1, 1))  # touched: same bytes, another mtime
    assert vfm_curator.curate(tmp_path / "in", out, SERIAL).changed_inputs == {}
    make_video(tmp_path / "in" / "a.mp4", [30, 18], seed=7)  # re-exported: other bytes at the same path
    again = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    assert (again.processed, again.skipped, again.changed_inputs) == (0, 2, {"file": 1})
    assert "1 finished video changed since it was clipped (file replaced 1) was skipped" in again.changed_inputs_line()


def test_a_caption_added_after_clipping_is_named_as_changed(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    out = tmp_path / "out"
    vfm_curator.curate(tmp_path / "in", out, SERIAL)
    (tmp_path / "in" / "a.txt").write_text("a red square moves left")
    assert vfm_curator.curate(tmp_path / "in", out, SERIAL).changed_inputs == {"caption": 1}


def test_a_moved_folder_is_not_clipped_again_and_the_cli_names_the_copies(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    make_video(tmp_path / "in" / "b.mp4", [30], seed=2)
    (tmp_path / "in" / "b.txt").write_text("a caption moves with its video")
    out = tmp_path / "out"
    first = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    shutil.move(tmp_path / "in", tmp_path / "moved")
    result = CliRunner().invoke(app, ["curate", str(tmp_path / "moved"), "-o", str(out), "--runner", "serial",
                                      "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "copies: 2 inputs hold the bytes and caption of a video this folder has clipped" in result.output
    assert _rows(out) == first.clips  # no clip twice
    assert "2 inputs hold the bytes and caption of a video this folder has clipped" in (out / "report.html").read_text()


def test_the_same_bytes_with_another_caption_are_clipped_as_their_own_video(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    out = tmp_path / "out"
    first = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    shutil.copy(tmp_path / "in" / "a.mp4", tmp_path / "in" / "a-copy.mp4")
    (tmp_path / "in" / "a-copy.txt").write_text("the same footage, described")
    again = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    assert (again.processed, again.copies) == (1, {})
    assert _rows(out) == 2 * first.clips


def test_two_identical_files_in_one_run_are_clipped_once(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    shutil.copy(tmp_path / "in" / "a.mp4", tmp_path / "in" / "z.mp4")
    out = tmp_path / "out"
    summary = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    assert summary.processed == 1
    assert summary.copies == {str((tmp_path / "in" / "z.mp4").resolve()): str((tmp_path / "in" / "a.mp4").resolve())}


def _files(out, folder: str, suffix: str) -> set[str]:
    return {p.stem for p in (out / folder).glob(f"*.{suffix}")}


def test_redo_changed_clips_a_replaced_file_again_as_a_fresh_folder_would_and_leaves_no_old_clip(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [24, 24, 24], seed=1)
    make_video(tmp_path / "in" / "b.mp4", [30], seed=2)
    out = tmp_path / "out"
    vfm_curator.curate(tmp_path / "in", out, SERIAL)
    make_video(tmp_path / "in" / "a.mp4", [36, 36], seed=7)  # re-exported: cut in other places
    redo = vfm_curator.curate(tmp_path / "in", out, SERIAL, redo_changed=True)
    assert (redo.processed, redo.redone, redo.skipped, redo.changed_inputs) == (1, 1, 1, {})
    fresh = tmp_path / "fresh"
    vfm_curator.curate(tmp_path / "in", fresh, SERIAL)
    table = pq.read_table(out / "clips.parquet").to_pylist()
    assert sorted(r["id"] for r in table) == sorted(r["id"] for r in pq.read_table(fresh / "clips.parquet").to_pylist())
    assert _files(out, "clips", "mp4") == {r["id"] for r in table}  # the old version's clips are gone
    assert _files(out, "thumbs", "jpg") == _files(fresh, "thumbs", "jpg")
    for row in table:  # and each clip holds the new file's frames
        assert (out / row["path"]).read_bytes() == (fresh / row["path"]).read_bytes()
    assert vfm_curator.curate(tmp_path / "in", out, SERIAL, redo_changed=True).redone == 0  # done: nothing changed now


def test_redo_changed_applies_new_stage_options_to_finished_videos(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [24, 48, 24], seed=1)
    out = tmp_path / "out"
    assert vfm_curator.curate(tmp_path / "in", out, SERIAL).clips == 3
    longer = {**SERIAL, "options": {"split": {"min_clip_s": 1.5}}}  # 1 s shots are too short now: the 2 s one is left
    kept = vfm_curator.curate(tmp_path / "in", out, longer)
    assert (kept.clips, kept.other_options) == (3, {"split": 1})
    redo = vfm_curator.curate(tmp_path / "in", out, longer, redo_changed=True)
    assert (redo.redone, redo.clips) == (1, 1) == (1, vfm_curator.curate(tmp_path / "in", tmp_path / "fresh", longer).clips)
    assert _files(out, "clips", "mp4") == {r["id"] for r in pq.read_table(out / "clips.parquet").to_pylist()}


def test_sidecar_captions_added_after_an_uncaptioned_run_reach_every_clip_with_redo_changed(tmp_path):
    """The path the end-of-run advice gives for uncaptioned footage."""
    for i in range(2):
        make_video(tmp_path / "in" / f"v{i}.mp4", [24, 24], seed=i)
    out = tmp_path / "out"
    assert vfm_curator.curate(tmp_path / "in", out, SERIAL).uncaptioned == 4
    for i in range(2):
        (tmp_path / "in" / f"v{i}.txt").write_text(f"video {i}")
    again = vfm_curator.curate(tmp_path / "in", out, SERIAL, redo_changed=True)
    assert (again.redone, again.uncaptioned, again.clips) == (2, 0, 4)
    assert sorted(r["caption"] for r in pq.read_table(out / "clips.parquet").to_pylist()) == ["video 0"] * 2 + ["video 1"] * 2


def _two_videos_clipped(tmp_path):
    """in/a.mp4 (two shots) and in/b.mp4 (one) curated into out: (out, the table's rows, b's clip id)."""
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    make_video(tmp_path / "in" / "b.mp4", [30], seed=2)
    out = tmp_path / "out"
    vfm_curator.curate(tmp_path / "in", out, SERIAL)
    table = pq.read_table(out / "clips.parquet").to_pylist()
    return out, table, next(r["id"] for r in table if r["source"].endswith("b.mp4"))


def test_redo_changed_deletes_no_clip_file_of_another_video_that_a_crafted_record_lists(tmp_path):
    import json

    from vfm_curator.io import state
    from vfm_curator.tasks import video_id

    out, table, b_clip = _two_videos_clipped(tmp_path)
    record_a = state.record_path(out, video_id(str((tmp_path / "in" / "a.mp4").resolve())))
    record = json.loads(record_a.read_text())
    record["filtered"].append({"id": b_clip})  # an output folder from elsewhere: a's record names b's clip
    record_a.write_text(json.dumps(record))
    make_video(tmp_path / "in" / "a.mp4", [36, 36], seed=7)
    assert vfm_curator.curate(tmp_path / "in", out, SERIAL, redo_changed=True).redone == 1
    assert (out / "clips" / f"{b_clip}.mp4").is_file() and (out / "thumbs" / f"{b_clip}.jpg").is_file()


def test_a_json_sidecar_nested_too_deep_for_json_is_no_caption_not_a_run_ending_traceback(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    make_video(tmp_path / "in" / "b.mp4", [30], seed=2)
    (tmp_path / "in" / "a.json").write_text("[" * 100_000)  # read by the plan of every run since inputs are kept
    out = tmp_path / "out"
    first = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    assert (first.processed, first.failures, first.uncaptioned) == (2, 0, 3)
    assert vfm_curator.curate(tmp_path / "in", out, SERIAL).changed_inputs == {}


def test_a_video_whose_sidecar_name_the_filesystem_refuses_is_clipped(tmp_path):
    """A video named with 251 characters: its sidecar name ``<video>.mp4.txt`` is past NAME_MAX (255),
    so looking for it raised ENAMETOOLONG: the plan (which reads sidecars) ended the whole run."""
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    make_video(tmp_path / "in" / "b.mp4", [30], seed=2)
    os.rename(tmp_path / "in" / "b.mp4", tmp_path / "in" / f"{'v' * 251}.mp4")
    summary = vfm_curator.curate(tmp_path / "in", tmp_path / "out", SERIAL)
    assert (summary.processed, summary.failures) == (2, 0)


def test_redo_changed_never_deletes_the_file_a_link_planted_at_an_old_clips_name_points_to(tmp_path):
    out, table, b_clip = _two_videos_clipped(tmp_path)
    outside = tmp_path / "outside.mp4"
    outside.write_bytes(b"not the folder's")
    a_clips = [r["id"] for r in table if r["source"].endswith("a.mp4")]
    for old, target in zip(a_clips, (f"{b_clip}.mp4", str(outside))):  # a folder from elsewhere: clips are links
        (out / "clips" / f"{old}.mp4").unlink()
        (out / "clips" / f"{old}.mp4").symlink_to(target)
    make_video(tmp_path / "in" / "a.mp4", [36, 36], seed=7)  # cut elsewhere: a's old clips are dropped
    assert vfm_curator.curate(tmp_path / "in", out, SERIAL, redo_changed=True).redone == 1
    assert (out / "clips" / f"{b_clip}.mp4").is_file() and outside.read_bytes() == b"not the folder's"


def test_a_touched_file_is_fingerprinted_once_then_known_by_its_stat_again(tmp_path, monkeypatch):
    """Its record's stamp is brought up to date once its bytes are found the same, so every later
    run does not read it again. Counted through real runs (the fingerprint itself runs as it is)."""
    from vfm_curator.io import fingerprint as fp
    from vfm_curator.pipelines import clipping

    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    out = tmp_path / "out"
    vfm_curator.curate(tmp_path / "in", out, SERIAL)
    read: list[str] = []
    monkeypatch.setattr(clipping, "fingerprint", lambda path: read.append(path) or fp.fingerprint(path))
    os.utime(tmp_path / "in" / "a.mp4", ns=(1, 1))  # touched: same bytes, another mtime
    assert vfm_curator.curate(tmp_path / "in", out, SERIAL).changed_inputs == {}
    assert len(read) == 1
    again = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    assert (again.skipped, again.changed_inputs, len(read)) == (1, {}, 1)  # a stat, no read


def test_a_moved_folder_whose_captions_changed_is_the_same_videos_with_a_changed_caption(tmp_path):
    """Found by their bytes: not clipped beside the old clips; the caption change is a changed
    input like any other (named, skipped; --redo-changed clips them again in place of the old)."""
    import json

    moved, out, clips = moved_and_recaptioned(tmp_path)
    again = vfm_curator.curate(moved, out, SERIAL)
    assert (again.processed, again.changed_inputs, len(again.copies)) == (0, {"caption": 1}, 1)
    assert _rows(out) == clips
    redo = vfm_curator.curate(tmp_path / "moved", out, SERIAL, redo_changed=True)
    assert (redo.processed, redo.redone, redo.changed_inputs) == (1, 1, {})
    table = pq.read_table(out / "clips.parquet").to_pylist()
    a_rows = [r for r in table if r["source"].endswith("a.mp4")]
    assert len(table) == clips and len(a_rows) == 2
    assert {r["caption"] for r in a_rows} == {"a red square moves left"}
    assert {r["source"] for r in a_rows} == {str((tmp_path / "moved" / "a.mp4").resolve())}
    assert _files(out, "clips", "mp4") == {r["id"] for r in table}  # the old path's clip files are gone
    sources = {json.loads(p.read_text())["source"] for p in (out / ".state" / "videos").glob("*.json")}
    assert str((tmp_path / "in" / "a.mp4").resolve()) not in sources  # and its record
    done = vfm_curator.curate(tmp_path / "moved", out, SERIAL, redo_changed=True)
    assert (done.processed, done.changed_inputs, len(done.copies)) == (0, {}, 1)


def test_a_folder_clipped_before_the_input_index_finds_its_moved_videos(tmp_path):
    """The index is built from the records once, on the first run that needs it."""
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    out = tmp_path / "out"
    first = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    shutil.rmtree(out / ".state" / "inputs")  # as a folder made before the index has it
    shutil.move(tmp_path / "in", tmp_path / "moved")
    again = vfm_curator.curate(tmp_path / "moved", out, SERIAL)
    assert (again.processed, len(again.copies), _rows(out)) == (0, 1, first.clips)
    assert (out / ".state" / "inputs" / ".built").is_file()


def test_a_link_planted_at_an_input_index_file_is_replaced_and_its_target_left_alone(tmp_path):
    from tests.planted_links import plant_link
    from vfm_curator.io.fingerprint import fingerprint

    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    out = tmp_path / "out"
    victim = plant_link(out / ".state" / "inputs" / fingerprint(str(tmp_path / "in" / "a.mp4")), tmp_path / "elsewhere")
    first = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    assert victim.read_text() == "precious"
    shutil.move(tmp_path / "in", tmp_path / "moved")  # and the index written in its place finds the video
    again = vfm_curator.curate(tmp_path / "moved", out, SERIAL)
    assert (again.processed, len(again.copies), _rows(out)) == (0, 1, first.clips)
