"""A file with several video streams is read from the stream the ffmpeg command line would pick: the
highest resolution (ties: the first), never a picture (cover art flagged ``attached_pic``, or a
one-frame still among moving streams); the record names the stream index used. Real H264 files
(PyAV), real curation runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from vfm_curator.api import curate
from vfm_curator.io import state
from vfm_curator.tasks import video_id

SERIAL = {"run": {"runner": "serial"}, "options": {"split": {"min_clip_s": 0.5}}}


def _frame(i: int, w: int, h: int, seed: int):
    import av

    rng = np.random.default_rng(seed)
    img = np.broadcast_to(rng.integers(0, 255, 3, dtype=np.uint8), (h, w, 3)).copy()
    img[:, (i * 2) % w] = 255  # a moving bar: motion, one shot
    frame = av.VideoFrame.from_ndarray(img, format="rgb24")
    frame.pts = i
    return frame


def write_streams(path: Path, streams: list[dict], num_frames: int = 30) -> Path:
    """One file holding a stream per entry of ``streams``: ``{"size": (w, h)}`` an H264 video of
    ``num_frames``, with ``"still": True`` a one-frame mjpeg picture, with ``"cover": True`` that
    picture flagged as cover art (``attached_pic``)."""
    import av
    from av.stream import Disposition

    path.parent.mkdir(parents=True, exist_ok=True)
    container = av.open(str(path), "w")
    made = []
    for k, spec in enumerate(streams):
        w, h = spec["size"]
        still = spec.get("still") or spec.get("cover")
        stream = container.add_stream("mjpeg" if still else "libx264", rate=1 if still else 24)
        stream.width, stream.height, stream.pix_fmt = w, h, "yuvj420p" if still else "yuv420p"
        if not still:
            stream.options = {"preset": "ultrafast"}
        if spec.get("cover"):
            stream.disposition = Disposition.attached_pic
        made.append((stream, [_frame(i, w, h, seed=k).reformat(format=stream.pix_fmt) for i in range(1 if still else num_frames)]))
    for stream, frames in made:
        for frame in frames:
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    container.close()
    return path


def _curated(path: Path, out: Path) -> tuple[dict, list[tuple[int, int]]]:
    """The video's record and its clips' (width, height)."""
    curate([str(path)], out, SERIAL)
    record = state.load_record(out, video_id(str(path)))
    table = pq.read_table(out / "clips.parquet", columns=["width", "height"]).to_pylist()
    return record, [(r["width"], r["height"]) for r in table]


@pytest.mark.parametrize("ext", ["mkv", "mp4"])
def test_the_highest_resolution_video_stream_is_read_not_the_first(tmp_path, ext):
    path = write_streams(tmp_path / f"two.{ext}", [{"size": (64, 48)}, {"size": (128, 96)}])
    record, sizes = _curated(path, tmp_path / "out")
    assert record["status"] == "ok" and record["meta"]["stream"] == 1 and record["meta"]["video_streams"] == 2
    assert set(sizes) == {(128, 96)}


def test_video_streams_of_one_resolution_read_the_first(tmp_path):
    path = write_streams(tmp_path / "twins.mkv", [{"size": (64, 48)}, {"size": (64, 48)}])
    record, sizes = _curated(path, tmp_path / "out")
    assert record["meta"]["stream"] == 0 and set(sizes) == {(64, 48)}


@pytest.mark.parametrize("ext, picture", [("mp4", "cover"), ("mkv", "cover"), ("mkv", "still")])
def test_a_picture_larger_than_the_video_is_never_the_video_stream(tmp_path, ext, picture):
    path = write_streams(tmp_path / f"poster.{ext}", [{"size": (256, 256), picture: True}, {"size": (64, 48)}])
    record, sizes = _curated(path, tmp_path / "out")
    assert record["status"] == "ok", record
    assert set(sizes) == {(64, 48)}
    assert record["meta"]["stream"] == next(i for i, s in enumerate(_video_sizes(path)) if s == (64, 48))


def _video_sizes(path: Path) -> list[tuple[int, int]]:
    import av

    with av.open(str(path)) as container:
        return [(s.codec_context.width, s.codec_context.height) for s in container.streams.video]


def test_a_two_stream_mkv_has_its_packets_counted_once_per_curation_though_every_reader_picks_its_stream(tmp_path):
    """Probe, decoder and frame reading each pick the stream; an mkv keeps no frame counts, so the pick
    reads the file's first packets from a second opening: once per file version, not once per pick."""
    from vfm_curator.io import container

    path = write_streams(tmp_path / "two.mkv", [{"size": (64, 48)}, {"size": (128, 96)}])
    before = container.packet_counts_read
    record, sizes = _curated(path, tmp_path / "out")
    assert container.packet_counts_read - before == 1
    assert record["meta"]["stream"] == 1 and set(sizes) == {(128, 96)}


def test_a_multi_stream_file_rewritten_at_its_path_has_its_packets_counted_again(tmp_path):
    """The counts are kept by the file's size and modification time: a file rewritten since (here the
    larger stream now a one-frame still) is read again and its stream chosen anew."""
    import os

    from vfm_curator.io import container

    path = write_streams(tmp_path / "two.mkv", [{"size": (64, 48)}, {"size": (128, 96)}])
    _curated(path, tmp_path / "out")
    stamp = os.stat(path).st_mtime_ns
    write_streams(path, [{"size": (64, 48)}, {"size": (128, 96), "still": True}])
    os.utime(path, ns=(stamp + 10**9, stamp + 10**9))  # a later time even on a coarse clock
    before = container.packet_counts_read
    record, sizes = _curated(path, tmp_path / "again")
    assert container.packet_counts_read - before == 1
    assert record["meta"]["stream"] == 0 and set(sizes) == {(64, 48)}
