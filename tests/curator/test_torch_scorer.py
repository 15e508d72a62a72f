"""The torch per-frame maths (shot-detection and motion scores, resizing, stitching similarity)
against the numpy reference, on CPU tensors of real decoded frames (the same code runs on CUDA:
tests/gpu/test_curator_gpu.py)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vfm_curator.colour import rgb_to_hsv
from vfm_curator.embedders.histogram import HistogramEmbedder
from vfm_curator.io.video import iter_frames, small_size
from vfm_curator.shot_detectors.content import ContentDetector, FrameScorer, detect_cuts
from vfm_curator.shot_detectors.torch_scorer import TorchFrameScorer, resize_frames
from vfm_curator.shot_detectors.torch_scorer import rgb_to_hsv as rgb_to_hsv_torch
from vfm_curator.stages.decode import DecodeStage
from vfm_curator.stages.split import SplitStage
from vfm_curator.stages.stitch import StitchStage
from vfm_curator.synth import make_video
from vfm_curator.tasks import VideoTask

#: the stated tolerance: float32 sums in another order (numpy pairwise vs torch's reduction)
RTOL, ATOL = 1e-4, 1e-5


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    path = tmp_path_factory.mktemp("v") / "v.mp4"
    cuts = make_video(path, [20, 14, 26, 16], width=320, height=180, seed=11, speed=2.0)
    return str(path), cuts


def _frames(path, size=None):
    w, h = size or (None, None)
    return [f for _, f in iter_frames(path, width=w, height=h)]


def test_torch_hsv_equals_the_numpy_conversion_on_every_colour_edge():
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (4096, 3), dtype=np.uint8)
    # ties between channels, greys, black, white: the branches of the hue formula
    edges = np.array([[0, 0, 0], [255, 255, 255], [128, 128, 128], [255, 0, 0], [255, 255, 0], [0, 255, 255],
                      [10, 10, 200], [200, 10, 200], [200, 200, 10], [0, 1, 0]], np.uint8)
    pixels = np.concatenate([pixels, edges])
    got = rgb_to_hsv_torch(torch.from_numpy(pixels)).numpy()
    np.testing.assert_allclose(got, rgb_to_hsv(pixels), rtol=1e-6, atol=1e-4)


def test_torch_scorer_matches_the_numpy_scorer_frame_by_frame_and_batched(video):
    path, cuts = video
    frames = _frames(path, small_size(320, 180, 64))
    reference = FrameScorer()
    one, batched = TorchFrameScorer(), TorchFrameScorer()
    for frame in frames:
        reference.push(frame)
        one.push(torch.from_numpy(frame))
    stack = torch.from_numpy(np.stack(frames))
    for i in range(0, len(frames), 7):  # batches that split shots and cuts at odd places
        batched.push_batch(stack[i : i + 7])
    for scorer in (one, batched):
        np.testing.assert_allclose(scorer.content, reference.content, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(scorer.motion, reference.motion, rtol=RTOL, atol=ATOL)
        assert scorer.content.dtype == np.float32 and len(scorer.content) == len(frames)
        assert detect_cuts(scorer.content, min_shot=6) == detect_cuts(reference.content, min_shot=6) == cuts
    assert reference.motion[1:].min() > 0  # the pattern drifts: the motion score is not trivially 0


def test_scorer_resizing_on_the_device_gives_the_same_cuts_as_ffmpeg_small_frames(video):
    path, cuts = video
    size = small_size(320, 180, 64)
    reference = FrameScorer()
    for frame in _frames(path, size):  # FFmpeg scales to 64x36 while converting to RGB
        reference.push(frame)
    scorer = TorchFrameScorer(size=size)
    full = torch.from_numpy(np.stack(_frames(path)))  # (T, 180, 320, 3): resized by torch
    scorer.push_batch(full)
    detector = ContentDetector()
    assert detector.spans(scorer.content, fps=24.0) == detector.spans(reference.content, fps=24.0)
    assert detect_cuts(scorer.content, min_shot=6) == cuts
    # another scaler (FFmpeg scales in YUV, torch in RGB), so not the same numbers: within 2 % of the range
    spread = float(reference.content.max())
    assert np.abs(scorer.content - reference.content).max() < 0.02 * spread
    np.testing.assert_allclose(scorer.motion, reference.motion, atol=0.005)


def test_resize_frames_shrinks_with_antialiasing_and_keeps_uint8():
    # a one-pixel checkerboard averages to grey when shrunk 4x with antialiasing (sampling would alias)
    board = ((np.indices((64, 64)).sum(axis=0) % 2) * 255).astype(np.uint8)
    frames = torch.from_numpy(np.repeat(board[None, ..., None], 3, axis=-1))
    small = resize_frames(frames, (16, 16))
    assert small.dtype == torch.uint8 and tuple(small.shape) == (1, 16, 16, 3)
    assert abs(float(small.float().mean()) - 127.5) < 1.0 and int(small.max()) - int(small.min()) <= 2


def test_torch_scorer_rejects_bad_frames():
    scorer = TorchFrameScorer()
    with pytest.raises(ValueError, match=r"expected \(N, H, W, 3\) uint8"):
        scorer.push_batch(torch.zeros((2, 8, 8, 3), dtype=torch.float32))
    with pytest.raises(ValueError, match="size must be"):
        TorchFrameScorer(size=(0, 4))
    assert scorer.content.shape == (0,)


def test_histogram_torch_path_matches_numpy_embeddings(video):
    path, _ = video
    frames = np.stack(_frames(path, (64, 36))[::5])
    embedder = HistogramEmbedder()
    got = embedder.embed_torch(torch.from_numpy(frames)).numpy()
    expected = embedder.embed(frames)
    assert got.shape == expected.shape == (len(frames), embedder.dim)
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    odd = HistogramEmbedder(bins=(6, 3, 5), grid=3)  # bin counts that are not powers of two
    np.testing.assert_allclose(odd.embed_torch(torch.from_numpy(frames)).numpy(), odd.embed(frames), rtol=RTOL, atol=ATOL)


def test_stitch_on_a_torch_device_merges_exactly_as_the_numpy_path(tmp_path, monkeypatch):
    path = tmp_path / "s.mp4"
    make_video(path, [30, 30, 30], seed=2, same_shot_after={0})  # a fake boundary at 30, a real cut at 60
    results, calls = {}, []
    for use_torch in (False, True):
        task = VideoTask(str(path))
        DecodeStage().process([task])
        SplitStage(method="stride", stride_s=0.5, min_clip_s=0.25).process([task])  # pieces of 12 frames
        stage = StitchStage(threshold=0.9)
        stage.ensure_setup()
        stage.use_torch = use_torch  # the device path on CPU tensors: what a GPU runs, minus the GPU
        original = stage._device_similarities
        monkeypatch.setattr(stage, "_device_similarities", lambda frames, f=original: calls.append(len(frames)) or f(frames))
        stage.process([task])
        assert task.failure is None
        results[use_torch] = [(c.start, c.end) for c in task.clips]
    assert len(calls) == 1  # one batched call for the whole video, only on the torch path
    assert results[True] == results[False] == [(0, 60), (60, 90)]


def test_stitch_device_option_is_checked_and_declares_a_gpu_only_on_cuda():
    with pytest.raises(ValueError, match="device = 'tpu'; accepted: auto, cpu, cuda"):
        StitchStage(device="tpu")
    assert StitchStage().configured_resources is None
    declared = StitchStage(device="cuda", gpu_share=0.2).configured_resources
    assert declared is not None and declared.gpus == 0.2
    if not torch.cuda.is_available():
        assert StitchStage(device="auto").configured_resources is None
        with pytest.raises(Exception, match="no CUDA device is visible"):
            StitchStage(device="cuda").ensure_setup()
