"""The curator's GPU stages on CUDA against their CPU references: the torch frame scorer, the
histogram embedder's torch path and stitching, CLIP and the VLM in bf16, the GPU shares the stages
declare, ``--gpus 1`` end to end, and NVENC where the card has one. Marked ``gpu``: skipped without
CUDA; run on a GPU machine with ``pytest -m gpu tests/gpu/test_curator_gpu.py``."""

from __future__ import annotations

import io

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("av")

from tests.curator.test_models import tiny_blip, tiny_clip, transcoded  # noqa: F401 - fixtures
from vfm_curator.embedders.histogram import HistogramEmbedder
from vfm_curator.io.video import iter_frames, small_size
from vfm_curator.shot_detectors.content import FrameScorer, detect_cuts
from vfm_curator.shot_detectors.torch_scorer import TorchFrameScorer
from vfm_curator.synth import make_video

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda")


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    path = tmp_path_factory.mktemp("v") / "v.mp4"
    cuts = make_video(path, [20, 14, 26, 16], width=320, height=180, seed=11, speed=2.0)
    return str(path), cuts


def test_torch_scorer_on_cuda_matches_the_numpy_scorer(video):
    path, cuts = video
    size = small_size(320, 180, 64)
    small = [f for _, f in iter_frames(path, width=size[0], height=size[1])]
    reference = FrameScorer()
    for frame in small:
        reference.push(frame)
    scorer = TorchFrameScorer()
    scorer.push_batch(torch.from_numpy(np.stack(small)).to(CUDA))
    np.testing.assert_allclose(scorer.content, reference.content, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(scorer.motion, reference.motion, rtol=1e-4, atol=1e-5)
    full = torch.from_numpy(np.stack([f for _, f in iter_frames(path)])).to(CUDA)
    resized = TorchFrameScorer(size=size)
    for frame in full:  # frame by frame, resized on the GPU
        resized.push(frame)
    assert detect_cuts(resized.content, min_shot=6) == detect_cuts(reference.content, min_shot=6) == cuts
    assert np.abs(resized.content - reference.content).max() < 0.02 * float(reference.content.max())


def test_histogram_embedding_on_cuda_matches_numpy_and_stitch_merges_the_same(video, tmp_path):
    from vfm_curator.stages.decode import DecodeStage
    from vfm_curator.stages.split import SplitStage
    from vfm_curator.stages.stitch import StitchStage
    from vfm_curator.tasks import VideoTask

    path, _ = video
    frames = np.stack([f for _, f in iter_frames(path, width=64, height=36)][::3])
    embedder = HistogramEmbedder()
    got = embedder.embed_torch(torch.from_numpy(frames).to(CUDA))
    assert got.device.type == "cuda"
    np.testing.assert_allclose(got.cpu().numpy(), embedder.embed(frames), rtol=1e-4, atol=1e-5)
    stitched = tmp_path / "s.mp4"
    make_video(stitched, [30, 30, 30], seed=2, same_shot_after={0})
    spans = {}
    for device in ("cpu", "cuda"):
        task = VideoTask(str(stitched))
        DecodeStage().process([task])
        SplitStage(method="stride", stride_s=0.5, min_clip_s=0.25).process([task])
        stage = StitchStage(device=device)
        assert (stage.configured_resources is not None) == (device == "cuda")
        stage.process([task])
        assert task.failure is None
        spans[device] = [(c.start, c.end) for c in task.clips]
    assert spans["cuda"] == spans["cpu"] == [(0, 60), (60, 90)]


def test_clip_in_bf16_on_cuda_agrees_with_fp32_on_the_cpu_and_embed_declares_a_share(tiny_clip, transcoded):
    from vfm_curator.embedders.clip import ClipEmbedder
    from vfm_curator.stages.embed import EmbedStage

    frames = np.stack(transcoded.clips[0].samples)
    gpu = ClipEmbedder(tiny_clip)  # auto: CUDA + bf16 here
    assert gpu.device == "cuda" and gpu.dtype == torch.bfloat16
    cpu = ClipEmbedder(tiny_clip, device="cpu")
    assert (gpu.embed(frames) * cpu.embed(frames)).sum(axis=1).min() > 0.98
    stage = EmbedStage(embedder="clip", embedder_options={"model_path": tiny_clip})
    assert stage.configured_resources.gpus == 0.25
    stage.process([transcoded])  # the batched CUDA path
    assert transcoded.failure is None and all(c.embedding.shape == (8,) for c in transcoded.clips)


def test_vlm_batched_on_cuda(tiny_blip, transcoded):
    from vfm_curator.captioners.vlm import VLMCaptioner

    clips = [c.samples for c in transcoded.clips] * 3
    fp32 = VLMCaptioner(tiny_blip, max_new_tokens=4, dtype="fp32", batch_size=4)
    assert fp32.device == "cuda"
    assert fp32.caption_many(iter(clips)) == [fp32.caption(f) for f in clips]
    bf16 = VLMCaptioner(tiny_blip, max_new_tokens=4)
    assert bf16.dtype == torch.bfloat16 and bf16.batch_size == 8
    assert all(isinstance(t, str) for t in bf16.caption_many(iter(clips)))


def test_curate_with_gpus_cuts_the_same_clips_as_cpu_only(tiny_clip, tmp_path):
    import pyarrow.parquet as pq

    import vfm_curator
    from vfm_cli.commands.curate import apply_gpus
    from vfm_curator.config import CurateConfig

    make_video(tmp_path / "in" / "a.mp4", [30, 40, 26], width=320, height=180, seed=3)
    make_video(tmp_path / "in" / "b.mp4", [50, 22], width=320, height=180, seed=4, same_shot_after={0})
    spans = {}
    for gpus in (0, 1):
        cfg = CurateConfig.from_dict({"run": {"runner": "serial"}, "options": {
            "split": {"min_clip_s": 0.5}, "stitch": {"device": "auto"},
            "embed": {"embedder": "clip", "embedder_options": {"model_path": tiny_clip}}}})
        apply_gpus(cfg, gpus)
        out = tmp_path / f"out{gpus}"
        summary = vfm_curator.curate([str(tmp_path / "in")], out, cfg)
        assert summary.failures == 0
        rows = pq.read_table(out / "clips.parquet").to_pylist()
        spans[gpus] = sorted((r["source"], r["start_frame"], r["end_frame"]) for r in rows)
    assert len(spans[0]) == len(spans[1])
    for (s0, a0, b0), (s1, a1, b1) in zip(spans[0], spans[1]):
        assert s0 == s1 and abs(a0 - a1) <= 1 and abs(b0 - b1) <= 1


def test_nvenc_writes_the_same_container_codec_and_profile_as_libx264(tmp_path):
    import av

    from vfm_curator.io import encode

    ok, why = encode.nvenc_probe()
    if not ok:
        pytest.skip(f"no NVENC on this GPU ({why})")
    make_video(tmp_path / "v.mp4", [40], width=320, height=180, seed=1)
    frames = [f for _, f in iter_frames(str(tmp_path / "v.mp4"))]
    seen = {}
    for codec in ("libx264", "h264_nvenc"):
        data = encode.encode_h264(frames, 24.0, codec=codec)
        with av.open(io.BytesIO(data)) as c:
            stream = c.streams.video[0]
            decoded = [f.to_ndarray(format="rgb24") for f in c.decode(stream)]
            seen[codec] = (c.format.name, stream.codec_context.name, stream.codec_context.profile,
                           stream.codec_context.pix_fmt, len(decoded))
        mse = np.mean([(a.astype(np.float64) - b) ** 2 for a, b in zip(decoded, frames)])
        assert 10 * np.log10(255**2 / max(mse, 1e-9)) > 30, codec  # PSNR: the picture survives
    assert seen["h264_nvenc"] == seen["libx264"] == (seen["libx264"][0], "h264", "High", "yuv420p", 40)
    assert encode.pick_codec("auto") == "h264_nvenc"
