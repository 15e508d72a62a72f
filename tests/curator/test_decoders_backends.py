"""The GPU backends' library-facing logic, checked on the CPU against the real libraries' behaviour:

- ``FrameTimes``: which container time each frame NVDEC hands out gets (PyNvVideoCodec 2.2.4's
  demuxer stamps packets with the container's own pts, as PyAV reads them: seen on these videos);
- ``split_surface`` / ``chroma_and_depth``: the NVDEC surface formats PyNvVideoCodec 2.2.4 names
  (``Pixel_Format``) and the pre-check that keeps streams NVDEC cannot decode away from it;
- DALI (only where ``nvidia.dali`` imports; CI has no DALI): our operator and pipeline arguments
  against DALI's own schema, and the whole ``SequenceReader`` loop run on DALI's CPU variant (which
  decodes MJPEG, not H264) against PyAV, video after video on one pipeline.

What needs a GPU (NVDEC's frames, DALI's mixed backend) is in test_decoders.py, marked ``gpu``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vfm_curator.decoders import container_times, stream_facts
from vfm_curator.decoders.base import NO_PTS, FrameTimes, one_line
from vfm_curator.decoders.nvdec import chroma_and_depth
from vfm_curator.decoders.yuv import split_nv12, split_surface
from vfm_curator.errors import InputError
from vfm_curator.synth import make_video, shot_frames, write_video


@pytest.fixture(scope="module")
def h264(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("backends")
    out = {"plain": d / "plain.mp4", "vfr": d / "vfr.mp4", "odd": d / "odd.mp4", "bframes": d / "bframes.mp4"}
    make_video(out["plain"], [10], seed=1)
    make_video(out["vfr"], [10], seed=3, vfr=True)
    make_video(out["odd"], [4], seed=4, width=95, height=63)  # 4:4:4
    _encode(out["bframes"], list(shot_frames(16, 96, 64, np.random.default_rng(7))), "libx264", "yuv420p",
            {"preset": "medium", "crf": "18", "bf": "3"})
    return out


def _encode(path: Path, frames, codec: str, pix_fmt: str, options: dict | None = None, rotation: int = 0) -> Path:
    write_video(path, list(frames), codec=codec, pix_fmt=pix_fmt, options=options or {}, rotation=rotation)
    return path


def _display_order_pts(path: Path) -> tuple[list[int], float]:
    """The pts of every packet sorted into display order, and the stream's time base in seconds:
    the stamps NVDEC's frames carry (PyNvVideoCodec passes each packet's pts through the decoder)."""
    import av

    with av.open(str(path)) as c:
        stream = c.streams.video[0]
        pts = sorted(p.pts for p in c.demux(stream) if p.pts is not None and p.size)
        return pts, float(stream.time_base)


# --- FrameTimes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["plain", "vfr", "bframes"])
def test_frame_times_match_the_frames_own_timestamps_to_the_container(h264, case):
    pts, base = _display_order_pts(h264[case])
    times = container_times(str(h264[case]))
    timeline = FrameTimes(times, base)
    got = [timeline.time_of(p) for p in pts]
    assert got == list(times) and timeline.done and timeline.use_pts
    assert timeline.time_of(pts[-1] + 512) is None  # one frame more than the container has: left out


def edit_list_clip(src: Path, dst: Path, frames: int = 3) -> Path:
    """``src`` remuxed with its timestamps moved ``frames`` frames earlier: the mp4 muxer writes an
    edit list that starts the clip at 0, so the first ``frames`` frames (pts < 0) are pre-roll the
    container marks to discard - what a clip cut without re-encoding looks like. PyAV drops them;
    PyNvVideoCodec 2.2.4's demuxer hands their packets out (``discardable=1``, pts < 0)."""
    import av

    with av.open(str(src)) as inp, av.open(str(dst), "w") as out:
        stream = inp.streams.video[0]
        shift = frames * int(round(1 / (float(stream.time_base) * float(stream.average_rate))))
        target = out.add_stream_from_template(stream)
        for packet in inp.demux(stream):
            if packet.dts is None:
                continue
            packet.pts -= shift
            packet.dts -= shift
            packet.stream = target
            out.mux(packet)
    return dst


def test_frame_times_skip_edit_list_pre_roll(h264, tmp_path):
    """Counting frames would give NVDEC's three pre-roll frames the first three times and shift every
    frame of the clip by three; their own timestamps (before the first container time) leave them out."""
    import av

    clip = edit_list_clip(h264["bframes"], tmp_path / "cut.mp4")
    times = container_times(str(clip))
    with av.open(str(clip)) as c:
        assert len([f for f in c.decode(video=0)]) == len(times) == 13  # PyAV drops the pre-roll
    pts, base = _display_order_pts(clip)  # every packet, as NVDEC decodes them
    assert len(pts) == 16 and pts[:3] == [-1536, -1024, -512]
    timeline = FrameTimes(times, base)
    assert [timeline.time_of(p) for p in pts] == [None] * 3 + list(times)
    assert timeline.skipped == 3 and timeline.done
    counted = FrameTimes(times)  # the same frames counted (no time base): shifted by three
    assert [counted.time_of(p) for p in pts][3] == times[3] != times[0]


@pytest.mark.parametrize("stamps", ["none", "nopts", "constant", "other_unit"])
def test_frame_times_count_frames_when_timestamps_do_not_fit(h264, stamps):
    pts, base = _display_order_pts(h264["vfr"])
    times = container_times(str(h264["vfr"]))
    given = {"none": [None] * len(pts), "nopts": [NO_PTS] * len(pts), "constant": [0] * len(pts),
             "other_unit": [round(p * base * 1e6) for p in pts]}[stamps]  # microseconds
    timeline = FrameTimes(times, base)
    assert [timeline.time_of(p) for p in given] == list(times)
    assert not timeline.use_pts


# --- NVDEC surfaces and the capability pre-check ----------------------------------------------------


def test_split_surface_takes_pynvvideocodec_formats_and_refuses_the_rest(h264):
    import av
    import torch

    with av.open(str(h264["plain"])) as c:
        frame = next(c.decode(video=0))
    nv12 = torch.from_numpy(frame.reformat(format="nv12").to_ndarray().copy())  # (96, 96): 64 + 32 rows
    want = split_nv12(nv12, 64)
    for fmt, surface in (("Pixel_Format.NV12", nv12), ("NV12", nv12[..., None])):  # str(enum), a (R, W, 1) view
        assert all(torch.equal(a, b) for a, b in zip(split_surface(surface, fmt, 64), want))
    for fmt in ("Pixel_Format.P016", "NV16", "YUV444_16Bit", "RGB"):
        with pytest.raises(ValueError, match=r"not converted here; accepted: NV12, YUV444"):
            split_surface(nv12, fmt, 64)
    with pytest.raises(ValueError, match=r"at least 96 rows, got shape \(90, 96\)"):
        split_surface(nv12[:90], "NV12", 64)
    with pytest.raises(ValueError, match="uint8"):
        split_surface(nv12.to(torch.int16), "NV12", 64)


def test_chroma_and_depth_from_pyav_pixel_formats(h264):
    assert chroma_and_depth(stream_facts(str(h264["plain"])).pix_fmt) == ("420", 8)
    # PyNvVideoCodec 2.2.4's demuxer.ChromaFormat() says 4:2:0 for this stream; PyAV knows better
    assert chroma_and_depth(stream_facts(str(h264["odd"])).pix_fmt) == ("444", 8)
    assert [chroma_and_depth(f) for f in ("yuvj420p", "yuv420p10le", "p010le", "nv12", "yuv422p", "gray")] == [
        ("420", 8), ("420", 10), ("420", 10), ("420", 8), ("422", 8), ("Monochrome", 8)]
    with pytest.raises(ValueError, match="'rgb24' is not one NVDEC decodes"):
        chroma_and_depth("rgb24")


def test_pynvvideocodec_errors_become_one_line():
    # the text PyNvVideoCodec 2.2.4's CreateDemuxer raised here for a missing file
    exc = RuntimeError("CreateFormatContext : \nError code : -2\nError Type : avformat_open_input(&ctx, szFilePath, "
                       "NULL, NULL) returned error \" No such file or directory\"\nat /project/src/FFmpegDemuxer.h:1\n")
    text = one_line(exc)
    assert "\n" not in text and text.startswith("RuntimeError: CreateFormatContext : Error code : -2 Error Type")
    assert one_line(exc, first=True) == "RuntimeError: CreateFormatContext :"


def test_dali_errors_become_the_line_that_says_what_went_wrong():
    from vfm_curator.decoders.dali import dali_error

    # what DALI 2.4's Pipeline.run raised here for bytes that are not a video
    exc = RuntimeError(
        "Critical error in pipeline:\nError in CPU operator `nvidia.dali.fn.experimental.inputs.video`,\nwhich was "
        "used in the pipeline definition with the following traceback:\n\n  File \"dali.py\", line 165, in "
        "video_node\n    return fn.experimental.inputs.video(name=\"video\")\n\nencountered:\n\nAssert on "
        "\"frames_decoders_[0]->IsValid()\" failed: Failed to create video decoder for provided video data\nC++ "
        "context: [/opt/dali/dali/operators/video/input/video_input.h:291] \nCurrent pipeline object is no longer valid.")
    assert dali_error(exc) == ('RuntimeError: Assert on "frames_decoders_[0]->IsValid()" failed: Failed to create '
                               'video decoder for provided video data')
    assert dali_error(ValueError("one\ntwo")) == "ValueError: one two"


def test_a_library_that_fails_to_load_is_named_on_one_line(tmp_path, monkeypatch):
    """PyNvVideoCodec's import raises a RuntimeError of some 20 lines when the driver's
    libnvidia-encode is missing; ``available()`` says its first line."""
    from vfm_curator.decoders.base import gpu_library

    pkg = tmp_path / "fake_nvc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('raise RuntimeError("libnvidia-encode.so.1: cannot open shared object file\\n\\n'
                                     '=== TROUBLESHOOTING STEPS ===\\n1. Running in Docker?")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    lib, why = gpu_library("fake_nvc", "PyNvVideoCodec", torch_use="frames are torch tensors")
    assert lib is None
    assert why == "PyNvVideoCodec does not load: RuntimeError: libnvidia-encode.so.1: cannot open shared object file"


# --- DALI, where it is installed --------------------------------------------------------------------


def _dali():
    return pytest.importorskip("nvidia.dali", reason="nvidia-dali is not installed (CI has none)")


def test_dali_operator_and_pipeline_arguments_are_dali_s(tmp_path):
    """Every keyword our pipeline passes exists in the installed DALI's schema, the operator has a
    mixed (GPU) variant, and the graph builds with device "mixed" (no GPU needed to build the graph)."""
    _dali()
    from nvidia.dali import backend
    from nvidia.dali.pipeline import Pipeline

    from vfm_curator.decoders import dali as ours

    schema = backend.GetSchema("experimental__inputs__Video")
    for arg in ("sequence_length", "last_sequence_policy", "blocking"):
        assert schema.HasArgument(arg), arg
    assert "experimental__inputs__Video" in backend.RegisteredMixedOps()
    for device in ("mixed", "cpu"):
        pipe = Pipeline(batch_size=1, num_threads=2, device_id=0, prefetch_queue_depth=1, exec_async=False,
                        exec_pipelined=False)
        with pipe:
            node = ours.video_node(device)
            pipe.set_outputs(node)
        assert node.device == ("gpu" if device == "mixed" else "cpu")


@pytest.fixture(scope="module")
def mjpeg(tmp_path_factory) -> dict[str, Path]:
    """MJPEG files (DALI's CPU variant decodes MJPEG, VP8, VP9; not H264): frame counts around the
    32-frame sequence (a partial last one, exactly two, fewer than one) and a rotated one."""
    d = tmp_path_factory.mktemp("mjpeg")
    rng = np.random.default_rng(5)
    out = {}
    for name, n, rotation in (("n40", 40, 0), ("n64", 64, 0), ("n7", 7, 0), ("rot", 5, 90)):
        frames = list(shot_frames(n, 96, 64, rng))
        out[name] = _encode(d / f"{name}.mp4", frames, "mjpeg", "yuvj420p", rotation=rotation)
    out["edit"] = edit_list_clip(out["n40"], d / "edit.mp4")  # PyAV gives 37 frames
    return out


def _pyav(path: Path) -> list[np.ndarray]:
    from vfm_curator.io.video import iter_frames

    return [f for _, f in iter_frames(str(path))]


def _assert_same_frames(got: list[np.ndarray], ref: list[np.ndarray], what: str) -> None:
    """Frame i is PyAV's frame i: nearer to it than to any other (the picture drifts from frame to
    frame), and near in colour (DALI converts JPEG's YUV itself: 2-4.2/255 apart on average here)."""
    a = np.stack(got).astype(np.int16)
    b = np.stack(ref).astype(np.int16)
    nearest = [int(np.argmin(np.abs(frame[None] - b).mean(axis=(1, 2, 3)))) for frame in a]
    assert nearest == list(range(len(ref))), what
    mean = float(np.abs(a - b).mean())
    assert mean <= 6.0, (what, mean)


@pytest.mark.parametrize("executor", ["simple", "dynamic"])
def test_dali_sequence_reader_reads_video_after_video_like_pyav(mjpeg, executor):
    """The decode loop of the ``dali`` backend (feed, one run per 32 frames, the partial last
    sequence, the pipeline kept for the next video only after a clean end), on DALI's CPU variant,
    with each executor the backend may build its pipeline with."""
    _dali()
    from vfm_curator.decoders.dali import SequenceReader

    reader = SequenceReader(None, device="cpu", executors=(executor,))
    pipes = []
    for name in ("n40", "n64", "n7", "rot", "n40"):
        path = mjpeg[name]
        times = container_times(str(path))
        got = list(reader.frames(str(path), times))
        pipes.append(reader._pipe)
        ref = _pyav(path)
        assert [t for t, _ in got] == list(times), name
        frames = [f.numpy() for _, f in got]
        if name == "rot":  # DALI does not apply the display matrix: frames come as coded (64x96)
            assert frames[0].shape == (64, 96, 3) and ref[0].shape == (96, 64, 3)
            ref = [np.rot90(f, k=-1) for f in ref]  # PyAV's upright frames turned back
        assert [f.shape for f in frames] == [f.shape for f in ref]
        _assert_same_frames(frames, ref, name)
    assert len(set(map(id, pipes))) == 1  # every video read to its end: one pipeline throughout
    assert reader.executor == executor

    # an edit-listed clip: DALI decodes the 37 frames PyAV gives, then hands out 3 more (the
    # container's sample count, 40) that are not the clip's; counting stops at 37, the pipeline
    # is not reused (DALI is not at the video's end)
    times = container_times(str(mjpeg["edit"]))
    got = list(reader.frames(str(mjpeg["edit"]), times))
    assert [t for t, _ in got] == list(times) and len(times) == 37
    _assert_same_frames([f.numpy() for _, f in got], _pyav(mjpeg["edit"]), "edit")
    assert reader._pipe is pipes[-1] and not reader._clean

    # a consumer that stops early: the next video gets a fresh pipeline and only its own frames
    stream = reader.frames(str(mjpeg["n40"]), container_times(str(mjpeg["n40"])))
    next(stream)
    stream.close()
    first = reader._pipe
    got = list(reader.frames(str(mjpeg["n7"]), container_times(str(mjpeg["n7"]))))
    assert reader._pipe is not first and len(got) == 7
    _assert_same_frames([f.numpy() for _, f in got], _pyav(mjpeg["n7"]), "n7 after an early stop")


def test_dali_errors_name_the_call(mjpeg, h264, tmp_path):
    _dali()
    from vfm_curator.decoders.dali import SequenceReader

    reader = SequenceReader(None, device="cpu")
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"\x00not a video" * 100)
    with pytest.raises(InputError, match=r"DALI.*fn.experimental.inputs.video|Pipeline.feed_input") as err:
        list(reader.frames(str(junk), [0.0, 0.04]))
    assert "\n" not in str(err.value) and "Failed to create video decoder" in str(err.value)
    # H264 on the CPU variant: refused (GPU.md: "Codec 27 (h264) is not supported by the CPU variant")
    with pytest.raises(InputError, match="DALI") as err:
        list(reader.frames(str(h264["plain"]), container_times(str(h264["plain"]))))
    assert "\n" not in str(err.value)
    # and the reader still works after errors (a fresh pipeline)
    assert len(list(reader.frames(str(mjpeg["n7"]), container_times(str(mjpeg["n7"]))))) == 7
    # a pipeline no executor builds: one line naming the call and each executor's reason
    with pytest.raises(InputError, match=r"DALI's pipeline does not build \(fn.experimental.inputs.video, device "
                                         r"nonsense\): simple: .*; dynamic: ") as err:
        list(SequenceReader(None, device="nonsense").frames(str(mjpeg["n7"]), [0.0]))
    assert "\n" not in str(err.value)
