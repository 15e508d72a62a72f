"""A folder of the messy video people really have, curated as a user would (serial runner): every
good file gives clips of the right size, length and times; every bad one is a failure whose reason
says what the file is. Each file is tiny (a few dozen frames at 64x48)."""

from __future__ import annotations

import json
import os
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pyarrow.parquet as pq
import pytest

import vfm_curator
from vfm_curator.io.inputs import expand

from . import messy_inputs as messy

CONFIG = {"run": {"runner": "serial"}, "options": {"split": {"min_clip_s": 0.5}}}


def _run(src: Path, out: Path, config=CONFIG):
    vfm_curator.curate([str(src)], out, config)
    rows = pq.read_table(out / "clips.parquet").to_pylist()
    failures = {Path(r["source"]).name: r for r in map(json.loads, (out / "failures.jsonl").read_text().splitlines())}
    return rows, failures


def _clips(rows, name):
    return sorted((r for r in rows if Path(r["source"]).name == name), key=lambda r: r["start_frame"])


def _frames(out: Path, row) -> list:
    with av.open(str(out / row["path"])) as container:
        return list(container.decode(video=0))


@pytest.fixture(scope="module")
def curated(tmp_path_factory):
    root = tmp_path_factory.mktemp("messy")
    src = root / "in"
    # a one-frame picture is the file's first video stream, the real video the second
    messy.with_cover_first(src / "cover first.mkv", 30)
    # non-square pixels: 48x48 coded, shown 4:3 wide
    messy.write(src / "anamorphic.mp4", 30, width=48, height=48, sar=Fraction(4, 3))
    # two .ts recordings joined with cat: the clock starts again
    messy.spliced(src / "joined.ts", [dict(num_frames=25, fps=25), dict(num_frames=25, fps=25, first=25)])
    # MPEG program stream: its clock starts at 0.54 s
    messy.write(src / "program.mpg", 25, codec="mpeg2video", fps=25)
    # NTSC DV from a camcorder: 8:9 pixels, and a header rate of 60000 frames a second
    messy.write(src / "camcorder.dv", 30, codec="dvvideo", fmt="dv", width=720, height=480, pix_fmt="yuv411p",
                fps=30000 / 1001)
    messy.hdr10(src / "hdr10.mkv", 30)
    messy.interlaced(src / "camcorder interlaced.mp4", 30)
    # a raw H264 stream (cannot seek) and an AVCHD .m2ts (an extension of its own)
    messy.write(src / "raw stream.h264", 25, fmt="h264", fps=25)
    messy.write(src / "avchd.m2ts", 25, fmt="mpegts", fps=25)
    # a folder of links: a link to a folder elsewhere, a link back up (a loop), a broken link
    elsewhere = root / "elsewhere"
    messy.write(elsewhere / "linked.mp4", 30)
    (src / "linked").symlink_to(elsewhere)
    (src / "sub").mkdir()
    (src / "sub" / "loop").symlink_to(src)
    (src / "gone.mp4").symlink_to(root / "deleted.mp4")
    # not videos, named as videos
    from PIL import Image

    Image.fromarray(messy.pattern(0, 64, 48)).save(src / "photo.mp4", format="JPEG")
    messy.song_with_cover(src / "song.mp4")  # music with its cover picture: no video
    messy.write(src / "one row.mkv", 30, width=64, height=1, codec="ffv1", pix_fmt="yuv444p")  # too small for H264
    (src / "page.mp4").write_text("<!DOCTYPE html><html><body>403 Forbidden</body></html>\n")
    whole = messy.write(root / "whole.mp4", 30).read_bytes()  # libx264 mp4: the index (moov) comes last
    (src / "cut off.mp4").write_bytes(whole[: len(whole) // 2])
    out = root / "out"
    rows, failures = _run(src, out)
    return out, rows, failures


def test_cover_picture_first_is_not_the_video(curated):
    out, rows, failures = curated
    assert "cover first.mkv" not in failures
    [clip] = _clips(rows, "cover first.mkv")
    assert (clip["num_frames"], clip["width"], clip["height"]) == (30, 64, 48)
    assert len(_frames(out, clip)) == 30


def test_non_square_pixels_become_square(curated):
    out, rows, _ = curated
    [clip] = _clips(rows, "anamorphic.mp4")
    assert (clip["width"], clip["height"]) == (64, 48)  # 48 coded pixels of 4:3 are 64 square ones
    frame = _frames(out, clip)[0]
    assert (frame.width, frame.height) == (64, 48)
    # the picture is stretched, not cropped: the clip matches the source frame scaled to 64 wide
    source = messy.decoded_frames(out.parent / "in" / "anamorphic.mp4")[0].to_ndarray(format="rgb24")
    expected = av.VideoFrame.from_ndarray(source, format="rgb24").reformat(width=64, height=48).to_ndarray()
    assert np.abs(frame.to_ndarray(format="rgb24").astype(int) - expected).mean() < 8


def test_a_size_change_inside_a_span_splits_the_clip(tmp_path):
    # two recordings of different sizes joined with cat, cut at a stride longer than both together
    messy.spliced(tmp_path / "in" / "joined sizes.ts",
                  [dict(num_frames=25, fps=25), dict(num_frames=25, fps=25, width=96, height=64, first=25)])
    config = {"run": {"runner": "serial"}, "options": {"split": {"method": "stride", "stride_s": 5.0, "min_clip_s": 0.5}}}
    out = tmp_path / "out"
    rows, failures = _run(tmp_path / "in", out, config)
    assert not failures
    clips = _clips(rows, "joined sizes.ts")
    assert [(c["width"], c["height"]) for c in clips] == [(64, 48), (96, 64)]
    assert clips[0]["end_frame"] == clips[1]["start_frame"]
    for clip in clips:  # every clip's frames are its own size, none squeezed into another's
        frames = _frames(out, clip)
        assert len(frames) == clip["num_frames"] == clip["end_frame"] - clip["start_frame"]
        assert {(f.width, f.height) for f in frames} == {(clip["width"], clip["height"])}
    assert sum(c["num_frames"] for c in clips) >= 49  # a joint may cost MPEG-TS one frame
    assert clips[1]["start_s"] == pytest.approx(clips[1]["start_frame"] / 25, abs=0.05)


def test_times_count_from_the_first_frame_and_go_on_across_a_join(curated):
    _, rows, _ = curated
    [joined] = _clips(rows, "joined.ts")
    assert joined["num_frames"] == 50
    assert joined["start_s"] == 0.0
    assert joined["end_s"] == pytest.approx(50 / 25, abs=0.05)  # not 1 s: the second part's clock restarts
    [program] = _clips(rows, "program.mpg")
    assert program["start_s"] == 0.0 and program["end_s"] == pytest.approx(1.0, abs=0.05)


def test_camcorder_and_raw_streams(curated):
    out, rows, failures = curated
    assert not {"camcorder.dv", "raw stream.h264", "avchd.m2ts"} & set(failures)
    [dv] = _clips(rows, "camcorder.dv")
    assert (dv["width"], dv["height"], dv["num_frames"]) == (640, 480, 30)  # 720 pixels of 8:9
    assert dv["fps"] == pytest.approx(30000 / 1001, rel=1e-3)  # the frames' rate, not the header's 60000
    with av.open(str(out / dv["path"])) as container:
        assert float(container.streams.video[0].average_rate) == pytest.approx(30000 / 1001, rel=1e-3)
    assert [c["num_frames"] for c in _clips(rows, "raw stream.h264")] == [25]
    assert [c["num_frames"] for c in _clips(rows, "avchd.m2ts")] == [25]


def test_linked_folders_are_read_once_and_broken_links_are_failures(curated):
    _, rows, failures = curated
    assert len(_clips(rows, "linked.mp4")) == 1  # through the link; the loop adds no second copy
    assert not any("/loop/" in r["source"] for r in rows)
    assert "broken symbolic link" in failures["gone.mp4"]["reason"]
    assert failures["gone.mp4"]["cause"] == "input"


def test_files_that_are_not_videos_say_what_they_are(curated):
    _, _, failures = curated
    assert "still image" in failures["photo.mp4"]["reason"]
    assert failures["photo.mp4"]["kind"] == "unusable-input"
    assert "web page" in failures["page.mp4"]["reason"]
    assert failures["song.mp4"]["reason"] == "no video stream (streams: audio, video (a still picture))"
    assert "moov" in failures["cut off.mp4"]["reason"] and "cut off" in failures["cut off.mp4"]["reason"]
    assert failures["one row.mkv"]["reason"].startswith("frame size 64x1 is too small to make clips of")
    for record in failures.values():  # FFmpeg's errno number and the path are not the reason
        assert "Errno" not in record["reason"]


def test_directory_walk_follows_links_without_looping(tmp_path):
    (tmp_path / "in" / "a").mkdir(parents=True)
    (tmp_path / "data").mkdir()
    for name in ("in/a/x.mp4", "data/y.mp4"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "in" / "data").symlink_to(tmp_path / "data")
    (tmp_path / "in" / "again").symlink_to(tmp_path / "data")  # a second link to the same folder
    (tmp_path / "in" / "a" / "up").symlink_to(tmp_path / "in")  # a loop
    (tmp_path / "in" / "dead.mov").symlink_to(tmp_path / "nowhere.mov")
    (tmp_path / "in" / "a" / "x link.mp4").symlink_to(tmp_path / "in" / "a" / "x.mp4")  # one file, two names
    os.link(tmp_path / "in" / "a" / "x.mp4", tmp_path / "in" / "a" / "x hard.mp4")
    names = sorted(os.path.relpath(s.path, tmp_path / "in") for s in expand([str(tmp_path / "in")]))
    assert names == ["a/x hard.mp4", "again/y.mp4", "dead.mov"]  # not the symbolic link's name


def test_broken_links_in_globs_are_listed_and_named_ones_are_explained(tmp_path):
    (tmp_path / "a.mp4").write_bytes(b"x")
    (tmp_path / "dead.mp4").symlink_to(tmp_path / "gone.mp4")
    names = sorted(Path(s.path).name for s in expand([str(tmp_path / "*.mp4")]))
    assert names == ["a.mp4", "dead.mp4"]  # the run lists it as a failure, as a folder's broken link
    with pytest.raises(ValueError, match=r"is a broken symbolic link: it points to .*gone.mp4"):
        expand([str(tmp_path / "dead.mp4")])


def test_relative_times_repairs_restarts_and_repeats():
    from vfm_curator.stages.decode import relative_times

    joined = np.r_[np.arange(5) * 0.04 + 1.4, np.arange(5) * 0.04 + 1.4]  # cat a.ts a.ts
    times, moved = relative_times(joined, 25.0)
    np.testing.assert_allclose(times, np.arange(10) * 0.04)
    assert moved == 1
    repeated = np.array([0.0, 0.04, 0.04, 0.12, 0.16])  # one damaged timestamp
    times, moved = relative_times(repeated, 25.0)
    np.testing.assert_allclose(times, [0.0, 0.04, 0.08, 0.12, 0.16])
    assert moved == 1
    assert relative_times(np.array([0.54, 0.58]), 25.0)[0].tolist() == pytest.approx([0.0, 0.04])


def test_kept_audio_lines_up_when_the_clock_does_not_start_at_zero(tmp_path):
    src = tmp_path / "in"
    messy.with_audio(src / "broadcast.ts", 50, start_s=10.0, fmt="mpegts")
    config = {"run": {"runner": "serial"},
              "options": {"split": {"min_clip_s": 0.5}, "transcode": {"keep_audio": True}}}
    rows, failures = _run(src, tmp_path / "out", config)
    assert not failures
    [clip] = rows
    with av.open(str(tmp_path / "out" / clip["path"])) as container:
        audio = container.streams.audio[0]
        packets = [p for p in container.demux(audio) if p.pts is not None]
        assert packets, "the clip's audio track is empty"
        first = float(packets[0].pts * audio.time_base)
        last = float((packets[-1].pts + packets[-1].duration) * audio.time_base)
    assert first < 0.1  # starts with the picture, not 10 s later
    assert last == pytest.approx(2.0, abs=0.15)


def test_clips_encoded_from_rgb_say_which_colours_they_hold(curated):
    # frames that go through RGB (here: scaled to square pixels) are encoded with BT.601's matrix in
    # limited range; untagged, a player takes BT.709 from 720p up and shows every colour off
    out, rows, _ = curated
    [clip] = _clips(rows, "anamorphic.mp4")
    with av.open(str(out / clip["path"])) as container:
        context = container.streams.video[0].codec_context
        assert (int(context.colorspace), int(context.color_range)) == (6, 1)  # SMPTE170M (BT.601), MPEG range


def test_an_hdr_clip_keeps_its_primaries_and_transfer(curated):
    # 10-bit frames go through RGB made with the source's matrix: the values are still BT.2020 / PQ
    out, rows, _ = curated
    [clip] = _clips(rows, "hdr10.mkv")
    frame = _frames(out, clip)[0]
    assert (int(frame.color_primaries), int(frame.color_trc)) == (9, 16)  # BT2020, SMPTE2084 (PQ)
    assert (int(frame.colorspace), int(frame.color_range)) == (6, 1)  # the matrix the encoder used


@pytest.mark.parametrize("name, acodec, rate", [("phone.mov", "pcm_alaw", 8000), ("camera.avi", "adpcm_ima_wav", 22050)])
def test_kept_audio_that_mp4_cannot_hold_is_reencoded(tmp_path, name, acodec, rate):
    # A-law PCM (.mov from phones and cameras), IMA ADPCM (.avi from old cameras): mp4 takes neither
    messy.with_audio(tmp_path / "in" / name, 40, acodec=acodec, rate=rate)
    config = {"run": {"runner": "serial"},
              "options": {"split": {"min_clip_s": 0.5}, "transcode": {"keep_audio": True}}}
    rows, failures = _run(tmp_path / "in", tmp_path / "out", config)
    assert not failures
    [clip] = rows
    with av.open(str(tmp_path / "out" / clip["path"])) as container:
        audio = container.streams.audio[0]
        assert (audio.codec_context.name, audio.codec_context.sample_rate) == ("aac", rate)
        samples = np.concatenate([f.to_ndarray().reshape(-1) for f in container.decode(audio)])
    assert len(samples) / rate == pytest.approx(40 / 25, abs=0.07)  # the clip's 1.6 s, not more
    assert np.sqrt(np.mean(samples.astype(np.float64) ** 2)) == pytest.approx(0.5 / np.sqrt(2), rel=0.15)  # the tone


def test_interlaced_video_is_deinterlaced_frame_for_frame(curated):
    out, rows, _ = curated
    source = messy.decoded_frames(out.parent / "in" / "camcorder interlaced.mp4")
    assert source[10].interlaced_frame and messy.combing(source[10].to_ndarray(format="rgb24")) > 5
    [clip] = _clips(rows, "camcorder interlaced.mp4")
    frames = _frames(out, clip)
    assert len(frames) == clip["num_frames"] == 30  # one frame out for each frame in (bwdif, send_frame)
    assert max(messy.combing(f.to_ndarray(format="rgb24")) for f in frames) < 2


def test_the_gpu_backends_stream_facts_read_the_video_not_the_cover_picture(tmp_path):
    """NVDEC and DALI take rotation, colour and frame times from ``stream_facts`` /
    ``container_times``: those read the stream the PyAV path reads, not a 1-frame cover picture."""
    from vfm_curator import decoders
    from vfm_curator.io.video import iter_frames

    path = str(messy.with_cover_first(tmp_path / "cover first.mkv", 30))
    times = tuple(t for t, _ in iter_frames(path))
    assert len(times) == 30
    assert decoders.container_times(path) == times
    assert decoders.stream_facts(path).times == times
