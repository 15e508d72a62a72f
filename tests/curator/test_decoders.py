"""Decoder backends: ``pyav`` is today's decode path bit for bit; the GPU backends' container facts
(times, rotation, colour) and their YUV -> RGB path agree with PyAV within the stated tolerance (run on
the CPU here); ``auto`` picks ``pyav`` without a GPU and the run says so; names are checked. The
``gpu`` tests compare each GPU backend with ``pyav`` where its library and a CUDA device exist.

Tolerances (uint8 units, i.e. /255), from swscale's own rounding and chroma handling:
- full size: mean |diff| <= 1, max <= 4;
- scaled (the decode stage's small frames): mean <= 2, max <= 16.
Times and frame counts are identical, rotation is applied the same way.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from vfm_plugins import Notice

from vfm_curator import decoders
from vfm_curator.decoders.pyav import PyAVDecoder
from vfm_curator.errors import InputError
from vfm_curator.decoders.yuv import planes_to_rgb, split_nv12, split_planar
from vfm_curator.io.video import iter_frames, probe, small_size
from vfm_curator.shot_detectors.content import FrameScorer
from vfm_curator.stages.base import StageSetupError
from vfm_curator.stages.decode import DecodeStage
from vfm_curator.synth import make_video, shot_frames, write_video
from vfm_curator.tasks import VideoTask

from .test_decoders_backends import edit_list_clip

FULL_TOL = (1.0, 4)  # (mean, max) |diff| at full size
SCALED_TOL = (2.0, 16)  # (mean, max) |diff| scaled
# dali: DALI 2.4 turns NVDEC's NV12 into RGB itself (chroma interpolated bilinearly where swscale
# repeats it, rounded where swscale truncates); what a CPU model of its kernel gives on these
# sharp-edged test pictures, with a little room (test_dali_colour_path_..., docs/decoders.md)
DALI_FULL_TOL = (4.0, 32)
DALI_SCALED_TOL = (2.5, 20)


def _write(path: Path, frames: list[np.ndarray], *, pix_fmt: str = "yuv420p", options: dict | None = None,
           colorspace: int | None = None, rotation: int = 0) -> Path:
    """A real H264 mp4 with the given pixel format (``yuvj420p``: full range), x264 options and
    colour-matrix tag (1 = BT.709)."""
    write_video(path, frames, pix_fmt=pix_fmt, options=options, colorspace=colorspace, rotation=rotation)
    return path


def _frames(n: int, width: int, height: int, seed: int) -> list[np.ndarray]:
    return list(shot_frames(n, width, height, np.random.default_rng(seed)))


@pytest.fixture(scope="module")
def videos(tmp_path_factory) -> dict[str, Path]:
    """Small real H264 files covering what a backend must get right."""
    d = tmp_path_factory.mktemp("decoders")
    out = {}
    out["plain"] = d / "plain.mp4"
    make_video(out["plain"], [12, 12], seed=1)
    out["rotated"] = d / "rotated.mp4"
    make_video(out["rotated"], [12, 12], seed=2, rotation=90)
    out["vfr"] = d / "vfr.mp4"
    make_video(out["vfr"], [12, 12], seed=3, vfr=True)
    out["odd"] = d / "odd.mp4"  # 95x63: written as 4:4:4
    make_video(out["odd"], [12], seed=4, width=95, height=63)
    out["full_range"] = _write(d / "full.mp4", _frames(16, 96, 64, 5), pix_fmt="yuvj420p")
    out["bt709"] = _write(d / "bt709.mp4", _frames(16, 96, 64, 6), colorspace=1)
    out["bframes"] = _write(d / "bframes.mp4", _frames(24, 96, 64, 7),
                            options={"preset": "medium", "crf": "18", "bf": "3"})
    # an edit list whose first 3 frames are pre-roll PyAV drops (a clip cut without re-encoding)
    out["edit"] = edit_list_clip(out["bframes"], d / "edit.mp4")
    return {k: Path(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def big_videos(tmp_path_factory) -> dict[str, Path]:
    """320x192 videos: the scale at which the decode stage shrinks real footage (a few pixels of
    source per output pixel), for the colour-path tolerance."""
    d = tmp_path_factory.mktemp("decoders_big")
    return {
        "limited": _write(d / "limited.mp4", _frames(8, 320, 192, 11)),
        "full_range": _write(d / "full.mp4", _frames(8, 320, 192, 12), pix_fmt="yuvj420p"),
        "bt709": _write(d / "bt709.mp4", _frames(8, 320, 192, 13), colorspace=1),
        "rotated": _write(d / "rotated.mp4", _frames(8, 320, 192, 14), rotation=270),
    }


def _small(path: Path, width: int = 64) -> tuple[int, int]:
    info = probe(str(path))
    return small_size(info.width, info.height, width)


CASES = ["plain", "rotated", "vfr", "odd", "full_range", "bt709", "bframes"]


# --- pyav: today's path, bit for bit ----------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_pyav_backend_gives_iter_frames_times_and_frames_bit_for_bit(videos, case):
    path = str(videos[case])
    size = _small(videos[case])
    for want_size in (size, None):
        ref = list(iter_frames(path, width=want_size[0] if want_size else None,
                               height=want_size[1] if want_size else None))
        got = list(decoders.create("pyav").frames(path, want_size))
        assert [t for t, _ in got] == [t for t, _ in ref]
        assert len(got) == len(ref) > 0
        for (_, a), (_, b) in zip(got, ref):
            assert a.dtype == np.uint8 and a.shape == b.shape
            assert np.array_equal(a, b)


def test_one_pass_gives_every_requested_size(videos):
    path = str(videos["rotated"])
    size = _small(videos["rotated"], 32)
    both = list(PyAVDecoder().decode(path, [size, None]))
    small = list(PyAVDecoder().frames(path, size))
    full = list(PyAVDecoder().frames(path, None))
    assert len(both) == len(small) == len(full) == 24
    for (t, (s, f)), (ts, s_ref), (tf, f_ref) in zip(both, small, full):
        assert t == ts == tf
        assert np.array_equal(s, s_ref) and np.array_equal(f, f_ref)
        assert s.shape == (size[1], size[0], 3) and f.shape == (96, 64, 3)  # upright: 96 tall


def test_bad_sizes_are_refused_with_what_is_accepted(videos):
    with pytest.raises(ValueError, match="None or \\(width, height\\)"):
        list(PyAVDecoder().decode(str(videos["plain"]), ["big"]))
    with pytest.raises(ValueError, match="positive"):
        list(PyAVDecoder().decode(str(videos["plain"]), [(0, 10)]))


# --- what the GPU backends take from the container ---------------------------------------------------


@pytest.mark.parametrize("case", ["plain", "vfr", "bframes", "rotated"])
def test_container_times_are_pyav_decode_times(videos, case):
    path = str(videos[case])
    if case == "bframes":  # the case is only a case if packets really come out of display order
        import av

        with av.open(path) as c:
            pts = [p.pts for p in c.demux(video=0) if p.size]
        assert pts != sorted(pts)
    assert decoders.container_times(path) == tuple(t for t, _ in iter_frames(path))


@pytest.mark.parametrize("case, rotation, full_range, matrix", [
    ("plain", 0, False, "bt601"), ("rotated", 90, False, "bt601"), ("full_range", 0, True, "bt601"),
    ("bt709", 0, False, "bt709"),
])
def test_stream_facts_read_rotation_range_and_matrix(videos, case, rotation, full_range, matrix):
    facts = decoders.stream_facts(str(videos[case]))
    assert (facts.rotation, facts.full_range, facts.matrix) == (rotation, full_range, matrix)
    assert (facts.coded_width, facts.coded_height) == (96, 64)


def _diff(a, b) -> tuple[float, int]:
    d = np.abs(np.asarray(a, np.int16) - np.asarray(b, np.int16))
    return float(d.mean()), int(d.max())


def _yuv_frames(path: str, layout: str):
    """PyAV's decoded frames as the surfaces a GPU decoder hands over: NV12 (NVDEC's 4:2:0 output),
    or planar 4:4:4, as torch uint8 tensors."""
    import av
    import torch

    with av.open(path) as c:
        for frame in c.decode(video=0):
            if layout == "nv12":
                yield torch.from_numpy(frame.reformat(format="nv12").to_ndarray().copy())
            else:  # yuv444p: (3, H, W) planes -> one (3 * H, W) surface
                planes = frame.to_ndarray()
                yield torch.from_numpy(planes.reshape(-1, planes.shape[-1]).copy())


@pytest.mark.parametrize("case", ["limited", "full_range", "bt709", "rotated"])
def test_gpu_colour_path_matches_pyav_within_tolerance(big_videos, case):
    """The YUV -> RGB code the nvdec backend runs on its NV12 surfaces, run here on the CPU on the
    same YUV that PyAV converts: within the stated tolerance at full and small size."""
    path = str(big_videos[case])
    facts = decoders.stream_facts(path)
    size = _small(big_videos[case])
    ref_full = [f for _, f in iter_frames(path)]
    ref_small = [f for _, f in iter_frames(path, width=size[0], height=size[1])]
    full, small = [], []
    for surface in _yuv_frames(path, "nv12"):
        y, u, v = split_nv12(surface, facts.coded_height)
        a, b = planes_to_rgb(y, u, v, sizes=[None, size], rotation=facts.rotation, full_range=facts.full_range,
                             matrix=facts.matrix)
        full.append(a.numpy())
        small.append(b.numpy())
    assert len(full) == len(ref_full) == 8
    assert full[0].shape == ref_full[0].shape and small[0].shape == ref_small[0].shape
    mean, worst = _diff(full, ref_full)
    assert mean <= FULL_TOL[0] and worst <= FULL_TOL[1], (mean, worst)
    mean, worst = _diff(small, ref_small)
    assert mean <= SCALED_TOL[0] and worst <= SCALED_TOL[1], (mean, worst)


def _dali_kernel_model(frame, full_range: bool):
    """What DALI 2.4's ``VideoColorSpaceConversionKernel`` (dali/operators/video/color_space.cu; the
    wheel's libdali_operators.so has its three conversion types and no other) makes of a decoded
    NV12 frame: luma as is, chroma sampled bilinearly at pixel centres (edges clamped), BT.601
    (limited, or JPEG full range), rounded to uint8 - whatever matrix the stream is tagged with.
    A model of DALI, for the ``dali`` backend's own conversion code; the real one runs in the
    ``gpu`` tests."""
    import torch
    import torch.nn.functional as F

    nv12 = torch.from_numpy(frame.reformat(format="nv12").to_ndarray().copy())
    y, u, v = split_nv12(nv12, frame.height)
    uv = F.interpolate(torch.stack([u.float(), v.float()])[None], size=tuple(y.shape), mode="bilinear",
                       align_corners=False)[0]
    Y, Cb, Cr = y.float(), uv[0] - 128.0, uv[1] - 128.0
    if not full_range:
        Y, Cb, Cr = (Y - 16.0) * 255.0 / 219.0, Cb * 255.0 / 224.0, Cr * 255.0 / 224.0
    r, b = Y + 1.402 * Cr, Y + 1.772 * Cb
    g = (Y - 0.299 * r - 0.114 * b) / 0.587
    return torch.stack([r, g, b], -1).round().clamp(0, 255).to(torch.uint8)


@pytest.mark.parametrize("case", ["plain", "full_range", "bt709", "big_bt709", "big_rotated"])
def test_dali_colour_path_matches_pyav_within_dali_tolerance(videos, big_videos, case):
    """The ``dali`` backend takes DALI's BT.601 RGB back to YUV and converts it with the stream's
    matrix, scaled as swscale scales: within DALI's tolerance of PyAV. Taking DALI's RGB as it is
    would put BT.709 streams outside it (DALI converts every stream with BT.601)."""
    import av

    from vfm_curator.decoders.dali import _finish

    path = str(big_videos[case[4:]] if case.startswith("big_") else videos[case])
    facts = decoders.stream_facts(path)
    size = _small(Path(path))
    with av.open(path) as c:
        dali_rgb = [_dali_kernel_model(f, facts.full_range) for f in c.decode(video=0)]
    for want, (tol_mean, tol_max) in ((None, DALI_FULL_TOL), (size, DALI_SCALED_TOL)):
        ref = [f for _, f in PyAVDecoder().frames(path, want)]
        got = [_finish(f, [want], facts)[0].numpy() for f in dali_rgb]
        assert [g.shape for g in got] == [f.shape for f in ref]
        mean, worst = _diff(got, ref)
        assert mean <= tol_mean and worst <= tol_max, (case, want, mean, worst)
        if facts.matrix == "bt709" and want is None and facts.rotation == 0:
            as_is = _diff([f.numpy() for f in dali_rgb], ref)[0]
            assert as_is > tol_mean, as_is  # what the re-conversion is for


def test_gpu_colour_path_reads_padded_and_444_surfaces(videos):
    """NVDEC surfaces may carry padding rows below the picture, and 4:4:4 comes as three planes."""
    import torch

    path = str(videos["odd"])  # 4:4:4, 95x63
    facts = decoders.stream_facts(path)
    ref = [f for _, f in iter_frames(path)]
    got = []
    for surface in _yuv_frames(path, "444"):
        padded = torch.zeros((3 * 64, 95), dtype=torch.uint8)  # each plane padded from 63 to 64 rows
        for i in range(3):
            padded[64 * i : 64 * i + 63] = surface[63 * i : 63 * (i + 1)]
        y, u, v = split_planar(padded, facts.coded_height, chroma="444")
        got.append(planes_to_rgb(y, u, v, sizes=[None], full_range=facts.full_range, matrix=facts.matrix)[0].numpy())
    mean, worst = _diff(got, ref)
    assert mean <= FULL_TOL[0] and worst <= FULL_TOL[1], (mean, worst)
    nv12 = next(_yuv_frames(str(videos["plain"]), "nv12"))  # 64 rows of luma, padded to 80
    padded = torch.zeros((120, 96), dtype=torch.uint8)
    padded[:64], padded[80:112] = nv12[:64], nv12[64:]
    y, u, v = split_nv12(padded, 64)
    assert torch.equal(y, nv12[:64]) and torch.equal(u, nv12[64:, 0::2]) and torch.equal(v, nv12[64:, 1::2])


# --- choosing a backend ------------------------------------------------------------------------------


def _no_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return True
    return not torch.cuda.is_available()


@pytest.mark.skipif(not _no_gpu(), reason="on a GPU machine auto may rightly pick a GPU backend")
def test_auto_picks_pyav_without_a_gpu_and_the_stage_records_it(videos, caplog):
    choice = decoders.choose(str(videos["plain"]))
    assert choice.name == "pyav" and choice.fps == {}
    assert set(choice.skipped) >= {"nvdec", "dali", "pyav-cuda"}
    task = VideoTask(str(videos["plain"]))
    with caplog.at_level("INFO", logger="vfm_curator.stages.decode"):
        DecodeStage().process([task])
    assert task.failure is None and task.meta["decoder"] == "pyav"
    assert "decode: decoder pyav on cpu (auto:" in caplog.text


def test_auto_measures_when_there_is_a_choice_and_keeps_the_fastest(videos, monkeypatch):
    """With two available backends, ``auto`` times both on the probe video and keeps the faster:
    a second, slower PyAV backend (a real plugin class that decodes the same way, then sleeps)."""
    import time

    class SlowPyAV(PyAVDecoder):
        name = "slow-pyav"

        def decode(self, path, sizes=(None,)):
            for item in super().decode(path, sizes):
                time.sleep(0.002)
                yield item

    targets = {"pyav": PyAVDecoder, "slow-pyav": SlowPyAV}
    monkeypatch.setattr(decoders, "_targets", lambda: targets)
    monkeypatch.setattr(decoders, "_CHOICES", {})
    choice = decoders.choose(str(videos["plain"]), frames=12)
    assert choice.name == "pyav" and set(choice.fps) == {"pyav", "slow-pyav"}
    assert choice.fps["pyav"] > choice.fps["slow-pyav"]
    assert "fastest measured" in choice.reason
    assert decoders.choose(str(videos["plain"]), frames=12) is choice  # measured once per process


def test_unknown_decoder_names_the_accepted_ones():
    with pytest.raises(ValueError) as err:
        DecodeStage(decoder="nvdecc")
    assert "unknown decoder 'nvdecc'; accepted: auto, dali, nvdec, pyav, pyav-cuda" in str(err.value)
    with pytest.raises(ValueError, match="accepted: auto, dali, nvdec, pyav, pyav-cuda"):
        decoders.create("ffmpeg")


def test_missing_libraries_say_why_and_a_named_backend_fails_setup(monkeypatch, videos):
    import sys

    from vfm_curator.decoders import dali, nvdec

    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", None)  # import fails as if not installed
    monkeypatch.setitem(sys.modules, "nvidia.dali", None)
    nvdec._available.cache_clear()
    dali._available.cache_clear()
    try:
        assert nvdec.NvdecDecoder.available() == (False, "PyNvVideoCodec is not installed")
        assert dali.DaliDecoder.available() == (False, "nvidia-dali is not installed")
        stage = DecodeStage(decoder="nvdec")  # the name is fine in the driver ...
        with pytest.raises(StageSetupError, match="decoder 'nvdec' is not available here: PyNvVideoCodec is not installed"):
            stage.ensure_setup()  # ... but this worker cannot run it
    finally:
        nvdec._available.cache_clear()
        dali._available.cache_clear()


def test_hwaccel_is_a_deprecated_alias_for_pyav_hwaccel(videos):
    # said when the options are checked, as a Notice (`vfm curate` prints it as a warning: line; a
    # DeprecationWarning was hidden by Python's default filters, in the driver and in Ray workers)
    with pytest.warns(Notice, match="hwaccel is deprecated; use decoder = 'pyav-cuda'"):
        stage = DecodeStage(hwaccel="cuda")
    decoder = stage.decoder_for(str(videos["plain"]), (64, 42))
    assert decoder.name == "pyav" and decoder.hwaccel == "cuda"
    with pytest.raises(ValueError, match="cannot be combined with decoder='dali'"):
        DecodeStage(hwaccel="cuda", decoder="dali")


def test_hwaccel_that_this_machine_cannot_open_decodes_in_software_with_the_same_frames(videos):
    # without a GPU, FFmpeg fails the open itself (EPERM) although software fallback was asked for:
    # that is the machine's lack, not the video's, so the frames come from software decoding
    for name in ("plain", "rotated"):
        path = str(videos[name])
        plain = list(iter_frames(path, width=64, height=42))
        accel = list(iter_frames(path, width=64, height=42, hwaccel="cuda"))
        assert [t for t, _ in accel] == [t for t, _ in plain]
        assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(accel, plain))


def test_pyav_cuda_counts_only_where_it_decodes_on_the_gpu():
    ok, why = decoders.decoder_class("pyav-cuda").available()
    if _no_gpu():
        assert not ok and why
    else:
        assert ok == ("decoded on the GPU" in why)


# --- the decode stage on top --------------------------------------------------------------------------


def _old_decode(path: str, width: int = 64):
    """The decode stage's scoring pass as it was before backends: iter_frames + FrameScorer."""
    w, h = _small(Path(path), width)
    scorer, times = FrameScorer(), []
    for t, frame in iter_frames(path, width=w, height=h):
        times.append(t)
        scorer.push(frame)
    return np.array(times), scorer.content, scorer.motion


@pytest.mark.parametrize("case", ["plain", "vfr", "rotated"])
def test_decode_stage_with_pyav_scores_exactly_as_before(videos, case):
    times, content, motion = _old_decode(str(videos[case]))
    task = VideoTask(str(videos[case]))
    DecodeStage(decoder="pyav").process([task])
    assert task.failure is None
    assert np.array_equal(task.times, times)
    assert np.array_equal(task.cut_scores, content) and np.array_equal(task.motion, motion)


def test_decode_stage_scores_tensor_frames_like_numpy_ones(videos):
    """A backend handing out torch tensors (as the GPU ones do; here on the CPU): the stage scores
    them with the torch scorer when it exists, else on the host, to the same cut scores."""
    import torch

    class TensorPyAV(PyAVDecoder):
        name = "tensor-pyav"

        def decode(self, path, sizes=(None,)):
            for t, frames in super().decode(path, sizes):
                yield t, [torch.from_numpy(f) for f in frames]

    times, content, motion = _old_decode(str(videos["plain"]))
    stage = DecodeStage(decoder="pyav")
    stage._decoder = TensorPyAV()
    task = VideoTask(str(videos["plain"]))
    stage.process([task])
    assert task.failure is None and task.meta["decoder"] == "tensor-pyav"
    assert np.array_equal(task.times, times)
    np.testing.assert_allclose(task.cut_scores, content, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(task.motion, motion, rtol=1e-4, atol=1e-5)


def test_a_gpu_backend_that_cannot_open_a_stream_falls_back_to_pyav(videos, caplog):
    class Refuses(PyAVDecoder):
        name = "refuses"

        def decode(self, path, sizes=(None,)):
            raise InputError("NVDEC cannot open this video: 4:4:4 H264")
            yield  # a generator, like every backend

    times, content, _ = _old_decode(str(videos["odd"]))
    stage = DecodeStage()
    stage._decoder = Refuses()
    task = VideoTask(str(videos["odd"]))
    with caplog.at_level("WARNING", logger="vfm_curator.stages.decode"):
        stage.process([task])
    assert task.failure is None and task.meta["decoder"] == "pyav"
    assert np.array_equal(task.times, times) and np.array_equal(task.cut_scores, content)
    assert "refuses cannot decode" in caplog.text


def test_measure_reports_decode_frames_per_second(videos):
    fps = decoders.measure("pyav", str(videos["plain"]), frames=8, size=(32, 22))
    assert 0 < fps < float("inf")
    with pytest.raises(ValueError, match="frames must be >= 1"):
        decoders.measure("pyav", str(videos["plain"]), frames=0)


# --- GPU parity: each backend against pyav, where its library and a GPU are ---------------------------

GPU_BACKENDS = ["nvdec", "dali", "pyav-cuda"]
GPU_CASES = ["plain", "rotated", "vfr", "full_range", "bt709", "bframes", "edit"]


def _need(name: str):
    ok, why = decoders.decoder_class(name).available()
    if not ok:
        pytest.skip(f"{name}: {why}")
    return decoders.create(name)


def _host(frame) -> np.ndarray:
    return frame.cpu().numpy() if hasattr(frame, "cpu") else np.asarray(frame)


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES)
@pytest.mark.parametrize("name", GPU_BACKENDS)
def test_gpu_backend_matches_pyav(name, case, videos, big_videos):
    decoder = _need(name)
    for path in (videos[case], big_videos.get(case if case != "plain" else "limited")):
        if path is None:
            continue
        path = str(path)
        size = _small(Path(path))
        tolerances = (DALI_FULL_TOL, DALI_SCALED_TOL) if name == "dali" else (FULL_TOL, SCALED_TOL)
        for want, (tol_mean, tol_max) in zip((None, size), tolerances):
            ref = list(PyAVDecoder().frames(path, want))
            got = list(decoder.frames(path, want))
            assert [t for t, _ in got] == [t for t, _ in ref], f"{name} {case}: times differ"
            frames = [_host(f) for _, f in got]
            if decoder.uses_gpu:
                assert all(f.device.type == "cuda" for _, f in got)  # left on the GPU
            assert [f.shape for f in frames] == [f.shape for _, f in ref]
            mean, worst = _diff(frames, [f for _, f in ref])
            assert mean <= tol_mean and worst <= tol_max, f"{name} {case} {want}: mean {mean:.2f} max {worst}"


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["plain", "vfr", "bframes", "edit"])
def test_nvdec_frames_carry_the_container_timestamps(case, videos):
    """PyNvVideoCodec's ``DecodedFrame.getPTS()`` is the packet's pts (what ``FrameTimes`` relies on
    to leave edit-list pre-roll out): every frame matched the container's time by its own stamp."""
    decoder = _need("nvdec")
    got = list(decoder.frames(str(videos[case])))
    timeline = decoder.timeline
    assert timeline.use_pts and timeline.done, "NVDEC frames' getPTS() did not match the container's times"
    assert len(got) == len(timeline.times) and timeline.skipped == (3 if case == "edit" else 0)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["nvdec", "dali"])
def test_gpu_backend_on_a_stream_nvdec_may_not_decode(name, videos):
    """H264 4:4:4 (what odd-sized videos are written as): NVDEC decodes it on few GPUs. Either the
    frames match PyAV, or a one-line InputError before any frame (the decode stage then uses pyav) -
    never a crash (PyNvVideoCodec ends the process on some CUDA errors, hence nvdec's
    GetDecoderCaps pre-check)."""
    decoder = _need(name)
    path = str(videos["odd"])
    try:
        got = list(decoder.frames(path))
    except InputError as exc:
        assert "\n" not in str(exc)
        if name == "nvdec":
            assert "GetDecoderCaps" in str(exc), str(exc)
        return
    ref = list(PyAVDecoder().frames(path))
    assert [t for t, _ in got] == [t for t, _ in ref]
    mean, worst = _diff([_host(f) for _, f in got], [f for _, f in ref])
    assert mean <= FULL_TOL[0] and worst <= FULL_TOL[1], (mean, worst)


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_BACKENDS)
def test_gpu_backend_decode_stage_cuts_match_pyav(name, tmp_path):
    _need(name)
    path = tmp_path / "cuts.mp4"
    cuts = make_video(path, [20, 16, 24], width=320, height=192, seed=21)
    ref = VideoTask(str(path))
    DecodeStage(decoder="pyav").process([ref])
    task = VideoTask(str(path))
    DecodeStage(decoder=name).process([task])
    assert task.failure is None and task.meta["decoder"] == name
    assert np.array_equal(task.times, ref.times)
    # the cuts stand out the same way: the largest content scores at the same frames
    top = sorted(np.argsort(task.cut_scores)[-len(cuts):].tolist())
    assert top == sorted(np.argsort(ref.cut_scores)[-len(cuts):].tolist()) == cuts


@pytest.mark.gpu
def test_auto_on_a_gpu_measures_every_available_backend(videos, capsys):
    decoders._CHOICES.clear()
    choice = decoders.choose(str(videos["plain"]), frames=24)
    available = [n for n, (ok, _) in decoders.availability().items() if ok]
    assert set(choice.fps) | set(choice.skipped) >= set(available)
    assert choice.name in choice.fps or len(available) == 1
    with capsys.disabled():
        print(f"\nauto picks {choice.name}: {choice.reason}; not available: {choice.skipped}")


@pytest.mark.skipif(not _no_gpu(), reason="on a GPU machine auto may rightly pick a GPU backend")
def test_curate_summary_says_which_decoder_ran(tmp_path):
    import json

    import vfm_curator

    make_video(tmp_path / "in" / "a.mp4", [12, 12], seed=31)
    make_video(tmp_path / "in" / "b.mp4", [12, 12], seed=32)
    out = tmp_path / "out"
    config = {"run": {"runner": "serial"}, "options": {"split": {"min_clip_s": 0.25}}}
    summary = vfm_curator.curate(tmp_path / "in", out, config)
    assert summary.processed == 2 and summary.decoders == {"pyav": 2}
    assert json.loads((out / "summary.json").read_text())["decoders"] == {"pyav": 2}


def test_a_gpu_decoder_asks_for_its_gpu_share_and_pyav_for_none():
    assert DecodeStage(decoder="pyav").configured_resources is None
    with pytest.warns(Notice, match="hwaccel is deprecated"):
        assert DecodeStage(hwaccel="cuda").configured_resources is None
    nvdec = DecodeStage(decoder="nvdec").configured_resources
    assert nvdec is not None and nvdec.gpus == 0.25
    assert DecodeStage(decoder="dali", gpu_share=0.5).configured_resources.gpus == 0.5
    if _no_gpu():
        assert DecodeStage().configured_resources is None  # auto without a GPU: pyav, CPU only
    with pytest.raises(ValueError, match="gpu_share = 0 is out of range"):
        DecodeStage(gpu_share=0)
