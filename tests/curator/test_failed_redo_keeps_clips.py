"""A finished video clipped again (``--redo-changed``) keeps its clips and its ok record when the redo
fails: only a redo that succeeds replaces them. The failure is still listed (failures.jsonl, the
report, the summary's count) and says that the earlier clips were kept. Real H264 files (PyAV),
real runs: the file is truncated between the runs, or the redo's options let no clip through."""

from __future__ import annotations

import json
import re
from pathlib import Path

import vfm_curator
from tests.curator.moved_folder import SERIAL, clip_rows, moved_and_recaptioned
from vfm_curator.synth import make_video


def _clip_files(out: Path) -> dict[str, bytes]:
    return {p.stem: p.read_bytes() for p in (out / "clips").glob("*.mp4")}


def _records_by_source(out: Path) -> dict[str, dict]:
    return {r["source"]: r for r in map(json.loads, (p.read_text() for p in (out / ".state" / "videos").glob("*.json")))}


def _failure_lines(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines() if line]


def test_a_redo_of_a_finished_video_that_fails_on_its_truncated_file_keeps_its_clips_and_ok_record(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    make_video(tmp_path / "in" / "b.mp4", [30], seed=2)
    out = tmp_path / "out"
    first = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    table, files = clip_rows(out), _clip_files(out)
    a = tmp_path / "in" / "a.mp4"
    a.write_bytes(a.read_bytes()[: a.stat().st_size // 2])  # its index (moov, at the end) lost: unreadable
    redo = vfm_curator.curate(tmp_path / "in", out, SERIAL, redo_changed=True)
    assert (redo.redone, redo.failures, redo.clips) == (1, 1, first.clips)
    assert clip_rows(out) == table and _clip_files(out) == files  # nothing that was done is lost
    kept = _records_by_source(out)[str(a.resolve())]
    assert kept["status"] == "ok" and kept["redo_failure"]["stage"] == "decode"
    [line] = _failure_lines(out)
    assert line["source"] == str(a.resolve()) and "earlier clips (2) are kept" in line["kept"]
    assert "earlier clips (2) are kept" in (out / "report.html").read_text()
    # the next run without --redo-changed lists it still; one with it that succeeds replaces the clips
    make_video(a, [24, 24, 24], seed=3)
    again = vfm_curator.curate(tmp_path / "in", out, SERIAL, redo_changed=True)
    assert (again.failures, again.clips) == (0, first.clips + 1)
    assert "redo_failure" not in json.loads((out / ".state" / "videos" / f"{kept['video_id']}.json").read_text())
    assert _failure_lines(out) == []


def test_a_failed_redo_of_a_moved_recaptioned_video_keeps_the_old_path_s_clips_and_record(tmp_path):
    moved, out, clips = moved_and_recaptioned(tmp_path)
    table, files = clip_rows(out), _clip_files(out)
    # no clip of the moved a passes (b moved with its caption: the same video, not clipped again)
    never = {**SERIAL, "options": {"split": {"min_clip_s": 10.0, "max_clip_s": 20.0}}}
    redo = vfm_curator.curate(moved, out, never, redo_changed=True)
    assert (redo.redone, redo.failures, redo.clips) == (1, 1, clips)
    assert clip_rows(out) == table and _clip_files(out) == files
    assert not (out / ".state" / "moved").exists()  # the old path's video was not forgotten
    [line] = _failure_lines(out)
    assert line["source"] == str(moved.resolve() / "a.mp4")
    assert "earlier clips (2) are kept" in line["kept"] and str(tmp_path / "in" / "a.mp4") in line["kept"]
    # a redo that succeeds then replaces the old path's clips: the video is in the table once
    again = vfm_curator.curate(moved, out, SERIAL, retry_failed="all")
    a_rows = [r for r in clip_rows(out) if r["source"].endswith("a.mp4")]
    assert (again.failures, len(clip_rows(out)), len(a_rows)) == (0, clips, 2)
    assert {r["source"] for r in a_rows} == {str(moved.resolve() / "a.mp4")}


def test_a_finished_video_whose_metadata_part_is_gone_and_whose_file_now_fails_is_listed_failed(tmp_path):
    """Done again because its part is gone (the table has none of its clips), not a redo: its
    failure takes the record's place and is listed, not hidden in an ok record the table cannot name."""
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    make_video(tmp_path / "in" / "b.mp4", [30], seed=2)
    out = tmp_path / "out"
    vfm_curator.curate(tmp_path / "in", out, SERIAL)
    a = tmp_path / "in" / "a.mp4"
    vid = _records_by_source(out)[str(a.resolve())]["video_id"]
    (out / ".state" / "parts" / f"{vid}.parquet").unlink()
    a.write_bytes(a.read_bytes()[: a.stat().st_size // 2])
    again = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    assert (again.retried, again.failures) == (1, 1)
    [line] = _failure_lines(out)
    assert line["source"] == str(a.resolve()) and line["stage"] == "decode" and "kept" not in line
    assert json.loads((out / ".state" / "videos" / f"{vid}.json").read_text())["status"] == "failed"


def test_a_failed_redo_is_no_longer_listed_once_the_file_is_back_as_its_clips_were_made_from(tmp_path):
    """Nothing is left to redo (the same bytes as the kept clips' record): the failure no run could
    clear is dropped, not listed in failures.jsonl and counted for good."""
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    out = tmp_path / "out"
    first = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    a = tmp_path / "in" / "a.mp4"
    whole = a.read_bytes()
    a.write_bytes(whole[: len(whole) // 2])
    assert vfm_curator.curate(tmp_path / "in", out, SERIAL, redo_changed=True).failures == 1
    a.write_bytes(whole)  # restored from a backup
    again = vfm_curator.curate(tmp_path / "in", out, SERIAL, redo_changed=True)
    assert (again.redone, again.failures, again.clips, again.changed_inputs) == (0, 0, first.clips, {})
    assert _failure_lines(out) == []
    assert "redo_failure" not in _records_by_source(out)[str(a.resolve())]


def test_the_videos_card_counts_a_moved_video_whose_redo_failed_once_as_an_ok_video(tmp_path):
    """Its old path's ok record and its new path's failed record are one source video (the failed
    record replaces the ok one): 2 videos in the folder, not 3, in the report's card and the summary."""
    moved, out, _ = moved_and_recaptioned(tmp_path)
    never = {**SERIAL, "options": {"split": {"min_clip_s": 10.0, "max_clip_s": 20.0}}}
    for _ in range(2):  # failed twice: still one video
        redo = vfm_curator.curate(moved, out, never, redo_changed=True, retry_failed="all")
    assert len(list((out / ".state" / "videos").glob("*.json"))) == 3  # a, b, and a's failed redo at its new path
    card = re.search(r"<li><span>videos</span><b>(\d+)</b><span class=\"muted\">([^<]*)</span>", (out / "report.html").read_text())
    assert card.group(1) == "2" and card.group(2).startswith("2 ok, 0 failed; 1 ok kept its clips after a failed redo")
    assert "each source video once" in card.group(2)
    assert redo.videos_total == 2 and json.loads((out / "summary.json").read_text())["videos_total"] == 2
