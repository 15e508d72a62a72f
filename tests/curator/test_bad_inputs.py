"""Bad input never stops a run: each kind is processed correctly or listed in failures.jsonl.

One pipeline run on Ray over every kind (plus a good video) is shared by the tests below.
"""

from __future__ import annotations

import json
from pathlib import Path

import av
import pyarrow.parquet as pq
import pytest

import vfm_curator
from vfm_curator.synth import make_audio_only, make_video


def _truncate(src: Path, dest: Path, keep: float) -> None:
    data = src.read_bytes()
    dest.write_bytes(data[: int(len(data) * keep)])


def _faststart(src: Path, dest: Path) -> None:
    """Remux with the index (moov) first, as streamed files are: a truncated copy still opens."""
    with av.open(str(src)) as inp, av.open(str(dest), "w", options={"movflags": "faststart"}) as out:
        stream = out.add_stream_from_template(inp.streams.video[0])
        for packet in inp.demux(inp.streams.video[0]):
            if packet.dts is None:
                continue
            packet.stream = stream
            out.mux(packet)


@pytest.fixture(scope="module")
def run(tmp_path_factory, ray_session):
    root = tmp_path_factory.mktemp("bad")
    src = root / "in"
    src.mkdir()
    make_video(src / "good.mp4", [30, 30], seed=1)
    (src / "zero_byte.mp4").write_bytes(b"")
    make_video(root / "long.mp4", [40, 40, 40], seed=2)
    _truncate(root / "long.mp4", src / "truncated.mp4", 0.6)  # index at the end: lost
    _faststart(root / "long.mp4", root / "long_fs.mp4")
    _truncate(root / "long_fs.mp4", src / "truncated_faststart.mp4", 0.6)  # index first: frames survive
    data = bytearray((root / "long.mp4").read_bytes())
    mid = len(data) // 2
    data[mid : mid + 2000] = bytes((i * 37) % 256 for i in range(2000))
    (src / "corrupt.mp4").write_bytes(bytes(data))
    (src / "non_video.mp4").write_text("this is a text file, not a video\n" * 20)
    make_audio_only(src / "audio_only.mp4", seconds=1.0)
    make_video(src / "vfr.mp4", [30, 30], seed=3, vfr=True)
    make_video(src / "rotated.mp4", [30], seed=4, rotation=90)
    make_video(src / "odd_sized.mp4", [30], seed=5, width=95, height=63)
    make_video(src / "very_short.mp4", [3], seed=6)
    out = root / "out"
    config = {"run": {"runner": "ray", "balance_interval_s": 0.5}, "options": {"split": {"min_clip_s": 0.5}}}
    summary = vfm_curator.curate([str(src)], out, config)
    failures = {Path(r["source"]).stem: r for r in map(json.loads, (out / "failures.jsonl").read_text().splitlines())}
    rows = pq.read_table(out / "clips.parquet").to_pylist()
    clips: dict[str, list[dict]] = {}
    for row in rows:
        clips.setdefault(Path(row["source"]).stem, []).append(row)
    return summary, out, failures, clips


def _clip_frames(out: Path, row: dict) -> tuple[str, int, int, int]:
    with av.open(str(out / row["path"])) as c:
        s = c.streams.video[0]
        n = sum(1 for _ in c.decode(s))
        return s.codec_context.name, n, s.width, s.height


def _processed_or_listed(run, name: str) -> str:
    summary, out, failures, clips = run
    if name in failures:
        assert failures[name]["reason"], failures[name]
        assert name not in clips
        return "listed"
    assert clips.get(name), f"{name}: neither processed nor listed in failures.jsonl"
    for row in clips[name]:
        assert _clip_frames(out, row)[:2] == ("h264", row["end_frame"] - row["start_frame"])
    return "processed"


def test_the_run_finishes_and_counts_every_input(run):
    summary, out, failures, clips = run
    assert summary.videos == 11 and summary.processed == 11
    assert summary.failures == len(failures)
    assert summary.clips == sum(len(v) for v in clips.values())


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("zero_byte", "empty file"),
        ("truncated", "cannot open"),
        ("non_video", "cannot open"),
        ("audio_only", "no video stream"),
        ("very_short", "too short"),
    ],
)
def test_unusable_input_is_listed_with_a_reason(run, name, reason):
    _, _, failures, _ = run
    assert name in failures
    assert reason in failures[name]["reason"]
    assert failures[name]["stage"] in ("decode", "split")


def test_truncated_file_with_index_first_keeps_its_complete_shots(run):
    assert _processed_or_listed(run, "truncated_faststart") == "processed"


def test_corrupt_file_is_processed_or_listed(run):
    _processed_or_listed(run, "corrupt")


def test_variable_frame_rate_video_is_processed(run):
    _, out, _, clips = run
    assert [(r["start_frame"], r["end_frame"]) for r in clips["vfr"]] == [(0, 30), (30, 60)]
    assert _processed_or_listed(run, "vfr") == "processed"


def test_rotated_video_is_processed_upright(run):
    _, out, _, clips = run
    (row,) = clips["rotated"]
    assert (row["width"], row["height"]) == (64, 96)
    assert _clip_frames(out, row)[2:] == (64, 96)


def test_odd_sized_video_is_processed_at_even_size(run):
    _, out, _, clips = run
    (row,) = clips["odd_sized"]
    assert _clip_frames(out, row) == ("h264", 30, 94, 62)


def test_good_video_gives_its_two_shots(run):
    _, _, _, clips = run
    assert [(r["start_frame"], r["end_frame"]) for r in clips["good"]] == [(0, 30), (30, 60)]
    assert all(len(r["embedding"]) > 0 and r["caption"] is None for r in clips["good"])
