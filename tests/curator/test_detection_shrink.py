"""The torch shrink (GPU decoders' YUV -> RGB, the torch scorer's resize) follows swscale's rule:
an area average for the detection sizes (io.video.is_detection_shrink, the same function that picks
swscale's flags), bilinear elsewhere; compared with real PyAV/swscale output on CPU tensors."""

from __future__ import annotations

import av
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vfm_curator import decoders
from vfm_curator.decoders.yuv import planes_to_rgb, resize_planes, split_nv12
from vfm_curator.io.video import SCALED_FLAGS, SMALL_FLAGS, is_detection_shrink, iter_frames, scaled_flags, small_size
from vfm_curator.shot_detectors.content import FrameScorer, detect_cuts
from vfm_curator.shot_detectors.torch_scorer import TorchFrameScorer, resize_frames
from vfm_curator.synth import make_video, shot_frames, write_video


def test_the_size_rule_is_one_function_for_swscale_and_torch():
    assert is_detection_shrink(320, 180, 64, 36) and is_detection_shrink(1920, 1080, 48, 27)
    assert is_detection_shrink(256, 256, 128, 128)  # exactly 2x, exactly the largest side
    assert not is_detection_shrink(256, 256, 130, 128)  # a side above SMALL_MAX_SIDE
    assert not is_detection_shrink(100, 60, 64, 36)  # less than 2x smaller
    assert not is_detection_shrink(32, 18, 64, 36)  # an enlargement
    for args in [(320, 180, 64, 36), (100, 60, 64, 36), (640, 360, 320, 180)]:
        assert scaled_flags(*args) == (SMALL_FLAGS if is_detection_shrink(*args) else SCALED_FLAGS)


@pytest.mark.parametrize("src, dst", [((192, 320), (38, 64)), ((180, 320), (36, 64)), ((63, 95), (27, 48)),
                                      ((1080, 1920), (36, 64))])
def test_area_shrink_is_swscales_area_filter(src, dst):
    """A grey plane shrunk by swscale with the detection flags and by resize_planes: within 1-2
    levels (swscale's fixed point). ``F.interpolate(mode="area")`` is 8-10 levels off on average
    where the factor is not an integer (192 -> 38, 95 -> 48), bilinear 6-11 everywhere."""
    rng = np.random.default_rng(sum(src))
    noise = rng.integers(0, 256, src).astype(np.float64) - 127.5
    plane = np.clip(np.cumsum(noise, axis=1) / 8 + 128, 0, 255).astype(np.uint8)  # detail at every scale
    frame = av.VideoFrame.from_ndarray(plane, format="gray")
    want = frame.reformat(width=dst[1], height=dst[0], format="gray", interpolation=SMALL_FLAGS).to_ndarray()
    got = resize_planes(torch.from_numpy(plane).float()[None, None], *dst, area=True)[0, 0].round().numpy()
    diff = np.abs(got.astype(int) - want.astype(int))
    assert diff.mean() <= 0.5 and diff.max() <= 2, (diff.mean(), diff.max())


def test_resize_frames_is_bilinear_outside_the_detection_sizes():
    import torch.nn.functional as F

    frames = torch.from_numpy(np.random.default_rng(3).integers(0, 256, (2, 180, 320, 3), dtype=np.uint8))
    got = resize_frames(frames, (160, 90))  # 160 > SMALL_MAX_SIDE: not a detection size
    x = F.interpolate(frames.permute(0, 3, 1, 2).float(), size=(90, 160), mode="bilinear", antialias=True,
                      align_corners=False)
    assert torch.equal(got, x.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1))


def test_torch_scorer_resizing_agrees_with_ffmpeg_small_frames_closely(tmp_path):
    """The scores of frames shrunk by torch against those FFmpeg shrinks while converting (the
    decode stage's CPU path): 0.11 % of the content range apart and 0.0002 in motion (bilinear in
    torch against swscale's area average: 0.34 % and 0.0014)."""
    path = tmp_path / "v.mp4"
    cuts = make_video(path, [20, 14, 26, 16], width=320, height=180, seed=11, speed=2.0)
    size = small_size(320, 180, 64)
    reference = FrameScorer()
    for _, frame in iter_frames(str(path), width=size[0], height=size[1]):
        reference.push(frame)
    scorer = TorchFrameScorer(size=size)
    scorer.push_batch(torch.from_numpy(np.stack([f for _, f in iter_frames(str(path))])))
    assert detect_cuts(scorer.content, min_shot=6) == detect_cuts(reference.content, min_shot=6) == cuts
    assert np.abs(scorer.content - reference.content).max() < 0.002 * float(reference.content.max())
    assert np.abs(scorer.motion - reference.motion).max() < 0.0005


def test_gpu_colour_path_shrinks_as_pyav_does(tmp_path):
    """planes_to_rgb on NV12 (what NVDEC hands over) against PyAV's 64-wide frames, 320x192 sources
    (tests/curator/test_decoders.py's big videos): at most 4 levels apart anywhere and 0.49 on
    average over the four (bilinear: 5 and 0.60)."""
    rng = np.random.default_rng
    means = []
    for name, seed, options in [("limited", 11, {}), ("full_range", 12, {"pix_fmt": "yuvj420p"}),
                                ("bt709", 13, {"colorspace": 1}), ("rotated", 14, {"rotation": 270})]:
        path = str(tmp_path / f"{name}.mp4")
        write_video(path, list(shot_frames(8, 320, 192, rng(seed))), **options)
        facts = decoders.stream_facts(path)
        size = small_size(192, 320, 64) if facts.rotation % 180 else small_size(320, 192, 64)
        want = [f for _, f in iter_frames(path, width=size[0], height=size[1])]
        got = []
        with av.open(path) as container:
            for frame in container.decode(video=0):
                nv12 = torch.from_numpy(frame.reformat(format="nv12").to_ndarray().copy())
                y, u, v = split_nv12(nv12, facts.coded_height)
                got.append(planes_to_rgb(y, u, v, sizes=[size], rotation=facts.rotation,
                                         full_range=facts.full_range, matrix=facts.matrix)[0].numpy())
        diff = np.abs(np.asarray(got, np.int16) - np.asarray(want, np.int16))
        assert diff.shape == (8, size[1], size[0], 3) and diff.max() <= 4, (name, diff.max())
        means.append(diff.mean())
    assert np.mean(means) <= 0.55, means
