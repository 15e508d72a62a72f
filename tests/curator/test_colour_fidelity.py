"""Decoded colours against an exact float conversion of the decoded YUV planes (numpy, the stream's
own matrix and range), on real H264 written by PyAV: BT.601 and BT.709, limited and full range,
4:2:0 and 4:4:4, smooth gradients and flat patches. swscale's default 4:2:0 paths truncated (every
frame 1-2.3 levels of 255 darker, and each transcode generation darker again); see
``vfm_curator.io.video._to_rgb``.

Bounds (levels of 255), per RGB channel:
- full size: signed mean within 0.25, max |error| 0.75 (correctly rounded; the old path: mean down
  to -1.47, max 2.9);
- scaled (the decode stage's small frames, 160x96 -> 64x38): the frames' mean colour within 0.25
  of the picture's exact mean colour (was -1.8/-1.2/-1.6 for BT.601, -2.3/-1.8/-2.2 for BT.709);
  max 2 against the reference shrunk in float (bilinear, antialiased) where the picture is
  smooth (at the patches' edges two scalers' filters and chroma siting rightly differ);
- a clip transcoded twice: its mean colour moves by at most 0.35 a generation (was -1 to -1.4).
"""

from __future__ import annotations

import io
from pathlib import Path

import av
import numpy as np
import pytest

from vfm_curator.io.video import iter_frames, probe, small_size
from vfm_curator.stages.transcode import TranscodeStage
from vfm_curator.synth import write_video
from vfm_curator.tasks import Clip, VideoTask

_K = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722)}
FULL_MEAN, FULL_MAX = 0.25, 0.75
SCALED_MEAN, SCALED_MAX = 0.25, 2.0
DRIFT = 0.35


def _pictures(n: int, width: int, height: int):
    """Smooth gradients over the top half (R across, G down, B diagonal, moving a little each frame)
    and eight flat colour patches below, in a flat grey frame 8 pixels wide (so that where a scaler
    puts chroma, a fraction of a pixel either way, does not move the picture's mean colour)."""
    xs, ys = np.meshgrid(np.linspace(0, 1, width), np.linspace(0, 1, height))
    colours = np.random.default_rng(0).integers(20, 236, (8, 3))
    for t in range(n):
        img = np.empty((height, width, 3))
        img[..., 0] = 20 + 200 * np.clip(xs + 0.02 * t, 0, 1)
        img[..., 1] = 16 + 220 * ys
        img[..., 2] = 16 + 220 * (xs + ys) / 2
        ph, pw = height // 4, width // 4
        for k, colour in enumerate(colours):
            r, c = divmod(k, 4)
            img[height // 2 + r * ph : height // 2 + (r + 1) * ph, c * pw : (c + 1) * pw] = colour
        img[:8], img[-8:], img[:, :8], img[:, -8:] = 128, 128, 128, 128
        yield img.round().astype(np.uint8)


def _write(path: Path, pix_fmt: str, matrix: str, n: int = 6, width: int = 160, height: int = 96) -> Path:
    # tagged in the stream's VUI: AVCOL_SPC_BT709 (1) or SMPTE170M (6, BT.601); range MPEG (1) or JPEG (2)
    write_video(path, list(_pictures(n, width, height)), pix_fmt=pix_fmt, options={"preset": "ultrafast", "crf": "16"},
                colorspace=1 if matrix == "bt709" else 6, color_range=2 if pix_fmt.startswith("yuvj") else 1)
    return path


def _reference(frame) -> np.ndarray:
    """The exact RGB (float64, clipped to 0-255) of a decoded frame's planes: the frame's matrix and
    range, 4:2:0 chroma repeated over its 2x2 pixels."""
    name = frame.format.name
    assert name in ("yuv420p", "yuvj420p", "yuv444p", "yuvj444p"), name
    h, w = frame.height, frame.width
    planes = [np.frombuffer(p, np.uint8).reshape(p.height, p.line_size)[:, : p.width].astype(np.float64)
              for p in frame.planes]
    y, u, v = planes
    if "420" in name:
        u = u.repeat(2, 0).repeat(2, 1)[:h, :w]
        v = v.repeat(2, 0).repeat(2, 1)[:h, :w]
    kr, kb = _K["bt709" if frame.colorspace == 1 else "bt601"]
    Y, Cb, Cr = y, u - 128.0, v - 128.0
    if frame.color_range != 2:  # limited (MPEG) range unless tagged full (JPEG)
        Y, Cb, Cr = (Y - 16.0) * 255.0 / 219.0, Cb * 255.0 / 224.0, Cr * 255.0 / 224.0
    r = Y + 2.0 * (1.0 - kr) * Cr
    b = Y + 2.0 * (1.0 - kb) * Cb
    g = (Y - kr * r - kb * b) / (1.0 - kr - kb)
    return np.clip(np.stack([r, g, b], -1), 0.0, 255.0)


def _references(path) -> list[np.ndarray]:
    with av.open(str(path) if not isinstance(path, bytes) else io.BytesIO(path)) as c:
        return [_reference(f) for f in c.decode(video=0)]


def _shrink(ref: np.ndarray, width: int, height: int) -> np.ndarray:
    import torch
    import torch.nn.functional as F

    t = torch.from_numpy(ref).permute(2, 0, 1)[None]
    return F.interpolate(t, size=(height, width), mode="bilinear", align_corners=False, antialias=True)[0].permute(1, 2, 0).numpy()


CASES = [(p, m) for p in ("yuv420p", "yuvj420p", "yuv444p", "yuvj444p") for m in ("bt601", "bt709")]


@pytest.fixture(scope="module")
def tagged(tmp_path_factory) -> dict[tuple[str, str], Path]:
    d = tmp_path_factory.mktemp("colour")
    out = {case: _write(d / f"{case[0]}_{case[1]}.mp4", *case) for case in CASES}
    for (pix_fmt, matrix), path in out.items():  # the files say what the case is about
        with av.open(str(path)) as c:
            frame = next(c.decode(video=0))
        assert frame.format.name == pix_fmt and frame.colorspace == (1 if matrix == "bt709" else 6)
        assert frame.color_range == (2 if pix_fmt.startswith("yuvj") else 1)
    return out


def _smooth(ref: np.ndarray, step: float = 12.0) -> np.ndarray:
    """Pixels whose 3x3 neighbourhood spans less than ``step`` levels in every channel: away from
    the patches' edges, where two scalers' filters and chroma siting rightly differ by tens of levels."""
    padded = np.pad(ref, ((1, 1), (1, 1), (0, 0)), mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(0, 1))
    return ((windows.max(axis=(-2, -1)) - windows.min(axis=(-2, -1))) < step).all(-1)


def _errors(got: list[np.ndarray], want: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    assert len(got) == len(want) > 0 and got[0].shape == want[0].shape
    e = (np.stack(got).astype(np.float64) - np.stack(want)).reshape(-1, 3)
    return e.mean(0), np.abs(e).max(0)


@pytest.mark.parametrize("case", CASES, ids=["-".join(c) for c in CASES])
def test_full_size_frames_are_the_exact_conversion_rounded(tagged, case):
    path = tagged[case]
    mean, worst = _errors([f for _, f in iter_frames(str(path))], _references(path))
    assert (np.abs(mean) <= FULL_MEAN).all() and (worst <= FULL_MAX).all(), (case, mean.round(2), worst.round(2))


@pytest.mark.parametrize("case", CASES, ids=["-".join(c) for c in CASES])
def test_scaled_frames_keep_the_colours(tagged, case):
    path = tagged[case]
    info = probe(str(path))
    w, h = small_size(info.width, info.height, 64)
    got = [f for _, f in iter_frames(str(path), width=w, height=h)]
    refs = _references(path)
    small_refs = [_shrink(r, w, h) for r in refs]
    smooth = [_smooth(r) for r in small_refs]
    assert all(m.mean() > 0.3 for m in smooth)  # 43-61 % of the pixels here
    worst = np.max([np.abs(g.astype(np.float64) - r)[m].max(0) for g, r, m in zip(got, small_refs, smooth)], axis=0)
    # the mean colour of each small frame against the picture's exact mean colour (shrinking keeps it)
    mean = np.mean([g.reshape(-1, 3).mean(0) - r.reshape(-1, 3).mean(0) for g, r in zip(got, refs)], axis=0)
    assert (np.abs(mean) <= SCALED_MEAN).all() and (worst <= SCALED_MAX).all(), (case, mean.round(2), worst.round(2))


def _transcode(path: Path, n: int) -> bytes:
    """One clip of frames [0, n) of ``path`` through the transcode stage (libx264, in memory)."""
    task = VideoTask(str(path))
    task.meta["fps"] = probe(str(path)).fps
    task.clips = [Clip(id="c0", start=0, end=n)]
    stage = TranscodeStage(encoder="libx264", crf=18)  # veryfast: High profile
    stage.setup()
    stage.process([task])
    assert task.failure is None, task.failure
    (clip,) = task.clips
    assert clip.num_frames == n
    return clip.mp4


@pytest.mark.parametrize("case", [("yuv420p", "bt709"), ("yuvj420p", "bt601")], ids=["limited-bt709", "full-bt601"])
def test_a_clip_transcoded_twice_keeps_its_mean_colour(tagged, tmp_path, case):
    source = tagged[case]
    n = 6
    generations = [source]
    for g in (1, 2):
        data = _transcode(generations[-1], n)
        with av.open(io.BytesIO(data)) as c:
            stream = c.streams.video[0]
            assert (stream.codec_context.name, stream.codec_context.profile, stream.format.name) == ("h264", "High", "yuv420p")
        generations.append(tmp_path / f"gen{g}.mp4")
        generations[-1].write_bytes(data)
    means = [np.mean([r.reshape(-1, 3).mean(0) for r in _references(p)], axis=0) for p in generations]
    assert all(len(_references(p)) == n for p in generations)
    for g in (1, 2):
        step = means[g] - means[g - 1]
        assert (np.abs(step) <= DRIFT).all(), (case, g, step.round(2))


def test_nv12_frames_as_the_cuda_hwaccel_hands_them_over_give_the_same_pixels(tmp_path):
    """``pyav-cuda`` frames come to the host as NV12: converted like planar 4:2:0 (chroma over its
    2x2 pixels, exact), not by swscale's 4:2:0 path, which samples chroma a pixel to the left (on
    these sharp-edged pictures that is tens of levels at the edges). Odd sizes included."""
    from av.video.reformatter import VideoReformatter

    from vfm_curator.io.video import _to_rgb
    from vfm_curator.synth import make_video

    make_video(tmp_path / "v.mp4", [3, 3], seed=5)
    with av.open(str(tmp_path / "v.mp4")) as c:
        decoded = list(c.decode(video=0))
    # H264 4:2:0 has even sides; other codecs' may be odd (here: the decoded frames scaled to 95x63)
    odd = [VideoReformatter().reformat(f, width=95, height=63) for f in decoded[:2]]
    for name, frames in (("even", decoded), ("odd", odd)):
        assert frames[0].format.name == "yuv420p"
        for frame in frames:
            nv12 = VideoReformatter().reformat(frame, format="nv12")
            assert nv12.format.name == "nv12"
            want = _to_rgb(frame, None, None, VideoReformatter())
            assert np.array_equal(_to_rgb(nv12, None, None, VideoReformatter()), want), name
            assert np.abs(want - _reference(frame)).max() <= FULL_MAX


def _planes(path) -> list[np.ndarray]:
    """Each frame's Y, U and V planes (uint8, as decoded: no conversion)."""
    with av.open(str(path)) as c:
        return [np.concatenate([np.frombuffer(p, np.uint8).reshape(p.height, p.line_size)[:, : p.width].ravel()
                                for p in f.planes]) for f in c.decode(video=0)]


def test_limited_range_4_2_0_is_encoded_from_its_decoded_planes_with_its_colour_tags(tagged, tmp_path):
    # No RGB round trip: the clip's planes are the source's up to the codec's loss, and the clip says
    # BT.709 as the source does (an RGB-fed encoder writes untagged BT.601, ~1 level off per plane)
    source = tagged[("yuv420p", "bt709")]
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(_transcode(source, 6))
    with av.open(str(clip)) as c:
        context = c.streams.video[0].codec_context
        assert (int(context.colorspace), int(context.color_range)) == (1, 1)
    diff = [np.abs(a.astype(int) - b.astype(int)).mean() for a, b in zip(_planes(source), _planes(clip))]
    assert len(diff) == 6 and max(diff) < 0.5, diff


def test_full_range_and_rotated_sources_still_go_through_rgb(tagged, tmp_path):
    from vfm_curator.synth import make_video

    full = tmp_path / "full.mp4"
    full.write_bytes(_transcode(tagged[("yuvj420p", "bt601")], 6))
    rotated = tmp_path / "rotated.mp4"
    make_video(rotated, [8], seed=3, width=96, height=64, rotation=90)
    turned = tmp_path / "turned.mp4"
    turned.write_bytes(_transcode(rotated, 8))
    for path in (full, turned):
        with av.open(str(path)) as c:
            frame = next(c.decode(video=0))
            assert frame.format.name == "yuv420p" and int(frame.color_range) != 2  # limited, as H264 High takes it
    with av.open(str(turned)) as c:
        assert (c.streams.video[0].height, c.streams.video[0].width) == (96, 64)  # upright
