"""What a clipping run accepts as input and options: its own output is never input, a bad file name
fails that file only, options are range-checked before any work, manifests are type-checked when
read, and every video that gives no clip says why."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import vfm_curator
from vfm_curator.errors import DiskFullError
from vfm_curator.execution.session import check_reachable
from vfm_curator.synth import make_video

SERIAL = {"run": {"runner": "serial"}}


def _failures(out: Path) -> dict[str, dict]:
    return {Path(f["source"]).name: f for f in map(json.loads, (out / "failures.jsonl").read_text().splitlines())}


def test_an_output_folder_inside_the_input_folder_is_never_read_as_input(tmp_path):
    make_video(tmp_path / "in" / "a.mp4", [30], seed=1)
    out = tmp_path / "in" / "out"
    for _ in range(3):
        summary = vfm_curator.curate(tmp_path / "in", out, SERIAL)
        assert (summary.videos, summary.clips) == (1, 1)
    assert {Path(r["source"]).name for r in pq.read_table(out / "clips.parquet").to_pylist()} == {"a.mp4"}
    clip = next((out / "clips").glob("*.mp4"))
    with pytest.raises(ValueError, match="is inside the output folder"):
        vfm_curator.curate([str(clip)], out, SERIAL)


def test_a_file_name_that_is_not_utf8_fails_that_file_only_and_is_named(tmp_path):
    folder = tmp_path / "in"
    make_video(folder / "good.mp4", [30], seed=1)
    bad = os.fsdecode(os.fsencode(str(folder)) + b"/caf\xe9.mp4")  # Latin-1 bytes: not UTF-8
    make_video(tmp_path / "x.mp4", [30], seed=2)
    os.rename(tmp_path / "x.mp4", bad)
    out = tmp_path / "out"
    summary = vfm_curator.curate(folder, out, SERIAL)
    assert (summary.videos, summary.clips, summary.failures) == (2, 1, 1)
    (line,) = map(json.loads, (out / "failures.jsonl").read_text().splitlines())
    assert (line["cause"], line["kind"]) == ("input", "bad-name")
    assert repr(bad) in line["reason"] and "caf\\udce9.mp4" in line["source"]
    assert "caf\\udce9.mp4" in (out / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("config, message", [
    ({"run": {"runner": "ray", "workers": {"decode": 0}}}, r"\[run\] workers.decode = 0; accepted: an integer >= 1"),
    ({"options": {"split": {"method": "stride", "stride_s": 0}}}, r"option stride_s = 0 is out of range; accepted: a number in \(0, inf\]"),
    ({"options": {"split": {"min_clip_s": -1}}}, r"option min_clip_s = -1 is out of range"),
    ({"options": {"transcode": {"crf": 99}}}, r"option crf = 99 is out of range; accepted: an integer in \[0, 51\]"),
    ({"options": {"decode": {"width": 0}}}, r"'decode': option width = 0 is out of range"),
    ({"stages": ["decode", "splt", "write"]}, r"unknown stage\(s\) 'splt'; available: .*split"),
    ({"run": {"queue_size": 0}}, r"queue_size = 0; accepted: an integer >= 1"),
])
def test_options_out_of_range_are_refused_before_any_work(tmp_path, config, message):
    make_video(tmp_path / "a.mp4", [12], seed=1)
    out = tmp_path / "out"
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=message):
        vfm_curator.curate(tmp_path / "a.mp4", out, config)
    assert time.perf_counter() - t0 < 5 and not out.exists()


def test_every_video_that_gives_no_clip_has_a_reason(tmp_path):
    folder = tmp_path / "in"
    make_video(folder / "all_cuts.mp4", [1] * 36, seed=1)  # a new picture every frame
    make_video(folder / "short.mp4", [12], seed=2)  # 0.5 s
    make_video(folder / "still.mp4", [30], seed=3, speed=0.0)  # no motion at all
    make_video(folder / "good.mp4", [30], seed=4)
    out = tmp_path / "out"
    config = {**SERIAL, "options": {"split": {"min_clip_s": 0.75}, "filter": {"min_motion": 0.001}}}
    summary = vfm_curator.curate(folder, out, config)
    failures = _failures(out)
    assert set(failures) == {"all_cuts.mp4", "short.mp4", "still.mp4"} and summary.clips == 1
    assert failures["all_cuts.mp4"]["kind"] == "no-clips" and "all under min_clip_s=0.75" in failures["all_cuts.mp4"]["reason"]
    assert failures["short.mp4"]["kind"] == "too-short" and "under min_clip_s=0.75" in failures["short.mp4"]["reason"]
    assert failures["still.mp4"]["kind"] == "all-filtered" and "motion" in failures["still.mp4"]["reason"]
    assert {f["cause"] for f in failures.values()} == {"config"}
    report = (out / "report.html").read_text(encoding="utf-8")
    assert all(name in report for name in failures)


@pytest.mark.parametrize("line, message", [
    ({"path": 3}, r"entry 1: 'path' is int 3; accepted: a string"),
    ({"path": "a.mp4", "caption": ["x"]}, r"entry 1: 'caption' is list \['x'\]; accepted: a string or null"),
])
def test_manifest_entries_of_the_wrong_type_are_refused_when_read(tmp_path, line, message):
    make_video(tmp_path / "a.mp4", [12], seed=1)
    (tmp_path / "m.jsonl").write_text(json.dumps(line) + "\n")
    with pytest.raises(ValueError, match=message):
        vfm_curator.curate(tmp_path / "m.jsonl", tmp_path / "out", SERIAL)
    assert not (tmp_path / "out").exists()


def test_an_output_path_that_is_a_file_is_refused_in_one_line(tmp_path):
    make_video(tmp_path / "a.mp4", [12], seed=1)
    (tmp_path / "taken").write_text("x")
    with pytest.raises(ValueError, match=r"-o .*taken is a file; accepted: a folder"):
        vfm_curator.curate(tmp_path / "a.mp4", tmp_path / "taken", SERIAL)


class _FullDisk:
    """``os`` as the output writer sees it on a full file system: fsync fails with ENOSPC."""

    def __getattr__(self, name):
        return getattr(os, name)

    @staticmethod
    def fsync(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_stops_the_run_with_the_file_it_was_writing(tmp_path, monkeypatch):
    import vfm_curator.io.paths
    import vfm_plugins.files
    from vfm_curator.io import input_index
    from vfm_curator.io.state_format import mark_state_format

    make_video(tmp_path / "a.mp4", [30], seed=1)
    make_video(tmp_path / "b.mp4", [30], seed=2)
    input_index.ensure(tmp_path / "out")  # the folder's (empty) input index exists: the disk fills at the
    mark_state_format(tmp_path / "out")  # video's commit (its clips are written aside first), and its state's format marker
    for writer in (vfm_curator.io.paths, vfm_plugins.files):  # the commit file is written by vfm_plugins.files
        monkeypatch.setattr(writer, "os", _FullDisk())
    with pytest.raises(DiskFullError, match=r"no space left on the device writing .*/out/\.state/commits/\w+\.json: free space"):
        vfm_curator.curate([tmp_path / "a.mp4", tmp_path / "b.mp4"], tmp_path / "out", SERIAL)
    assert not list((tmp_path / "out").rglob("*.tmp"))
    assert not list((tmp_path / "out" / "clips").iterdir())  # no clip took its name without its commit
    assert not list((tmp_path / "out" / ".state" / "videos").rglob("*.json"))  # the second video was not tried and failed


def test_an_unreachable_ray_address_fails_within_the_connect_timeout():
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"cannot reach the Ray cluster at '127.0.0.1:9' within 1 s"):
        check_reachable("127.0.0.1:9", 1.0)
    assert time.perf_counter() - t0 < 3
    with pytest.raises(ValueError, match="accepted: host:port, ray://host:port, auto"):
        check_reachable("nowhere", 1.0)
