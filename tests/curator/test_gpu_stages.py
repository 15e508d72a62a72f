"""Device and dtype options of the CLIP embedder and the VLM captioner, the GPU shares the stages
declare, batched embedding and captioning, and ``vfm curate --gpus N``: on CPU, with tiny random
transformers checkpoints (the CUDA runs: tests/gpu/test_curator_gpu.py)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from typer.testing import CliRunner

from tests.curator.test_models import tiny_blip, tiny_clip, transcoded  # noqa: F401 - fixtures
from vfm_cli.commands.curate import apply_gpus
from vfm_cli.main import app
from vfm_curator.config import CurateConfig
from vfm_curator.pipelines.clipping import stage_specs
from vfm_curator.stages.caption import CaptionStage
from vfm_curator.stages.embed import EmbedStage

CUDA = torch.cuda.is_available()
no_cuda = pytest.mark.skipif(CUDA, reason="checks the behaviour without a CUDA device")


@no_cuda
def test_clip_embedder_auto_is_cpu_fp32_here_and_bf16_stays_close(tiny_clip, transcoded):
    from vfm_curator.embedders.clip import ClipEmbedder

    frames = np.stack(transcoded.clips[0].samples)
    auto = ClipEmbedder(tiny_clip)
    assert (auto.device, auto.dtype) == ("cpu", torch.float32)
    assert next(auto.model.parameters()).dtype == torch.float32
    explicit = ClipEmbedder(tiny_clip, device="cpu", dtype="fp32")
    np.testing.assert_array_equal(auto.embed(frames), explicit.embed(frames))  # auto here is exactly fp32 CPU
    half = ClipEmbedder(tiny_clip, device="cpu", dtype="bf16", batch_size=2)
    assert next(half.model.parameters()).dtype == torch.bfloat16
    got = half.embed(frames)
    assert got.dtype == np.float32 and got.shape == (len(frames), 8)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert (got * auto.embed(frames)).sum(axis=1).min() > 0.98  # bf16 weights: the same directions


@no_cuda
def test_device_and_dtype_options_are_checked_with_what_is_accepted(tiny_clip, tiny_blip):
    from vfm_curator.captioners.vlm import VLMCaptioner
    from vfm_curator.embedders.clip import ClipEmbedder

    with pytest.raises(ValueError, match=r"clip embedder: device = 'gpu'; accepted: auto, cpu, cuda \(or cuda:N\)"):
        ClipEmbedder(tiny_clip, device="gpu")
    with pytest.raises(ValueError, match="clip embedder: dtype = 'fp16'; accepted: auto, bf16, fp32"):
        ClipEmbedder(tiny_clip, dtype="fp16")
    with pytest.raises(ValueError, match="device = 'cuda' but no CUDA device is visible here"):
        ClipEmbedder(tiny_clip, device="cuda")
    with pytest.raises(ValueError, match="vlm captioner: batch_size = 0"):
        VLMCaptioner(tiny_blip, batch_size=0)
    with pytest.raises(ValueError, match="vlm captioner: device = 'cuda' but no CUDA device"):
        VLMCaptioner(tiny_blip, device="cuda")
    with pytest.raises(ValueError, match="stage 'embed': dtype = 'half'"):
        EmbedStage(embedder="clip", embedder_options={"model_path": tiny_clip, "dtype": "half"})


def test_stages_declare_a_gpu_share_only_when_their_model_runs_on_cuda(tiny_clip, tiny_blip, tmp_path):
    assert EmbedStage().configured_resources is None  # histogram: no device
    assert EmbedStage(embedder="clip", embedder_options={"model_path": tiny_clip, "device": "cpu"}).configured_resources is None
    auto = EmbedStage(embedder="clip", embedder_options={"model_path": tiny_clip}).configured_resources
    assert (auto is not None and auto.gpus == 0.25) if CUDA else auto is None  # the default device is auto
    forced = EmbedStage(embedder="clip", embedder_options={"model_path": tiny_clip, "device": "cuda"}, gpu_share=0.5)
    assert forced.configured_resources.gpus == 0.5 and forced.configured_resources.cpus == 1.0
    assert CaptionStage().configured_resources is None  # no captioner
    vlm = CaptionStage(captioner="vlm", captioner_options={"model_path": tiny_blip, "device": "cuda"})
    assert vlm.configured_resources.gpus == 0.5
    with pytest.raises(ValueError, match=r"option gpu_share = 0 is out of range; accepted: a number in \(0, 1\]"):
        EmbedStage(gpu_share=0)
    # the pipeline hands the declaration to the runners (Ray's num_gpus, the balancer's GPU slots)
    cfg = CurateConfig.from_dict({"options": {"embed": {"embedder": "clip", "embedder_options": {
        "model_path": tiny_clip, "device": "cuda"}}}})
    declared = {s.name: s.declared().gpus for s in stage_specs(cfg, tmp_path / "out")}
    assert declared["embed"] == 0.25 and declared["decode"] == declared["split"] == 0.0
    assert declared["transcode"] == (0.1 if _nvenc() else 0.0)


def _nvenc() -> bool:
    from vfm_curator.io.encode import nvenc_available

    return nvenc_available()


def test_embed_batches_every_clip_of_a_call_in_one_embed_when_on_cuda(transcoded):
    """The CUDA path's gathering and splitting, run with the histogram embedder standing in for a
    model on CUDA (only its ``device`` says so): same embeddings as clip by clip, one call."""
    reference = EmbedStage()
    reference.process([transcoded])
    expected = [c.embedding.copy() for c in transcoded.clips]
    stage = EmbedStage()
    stage.ensure_setup()
    calls = []
    real = stage.embedder.embed
    stage.embedder.device = "cuda"
    stage.embedder.embed = lambda frames: calls.append(len(frames)) or real(frames)
    for clip in transcoded.clips:
        clip.embedding = None
    stage.process([transcoded])
    assert transcoded.failure is None
    assert calls == [sum(len(c.samples) for c in transcoded.clips)]  # one call for all clips
    for clip, want in zip(transcoded.clips, expected):
        np.testing.assert_allclose(clip.embedding, want, atol=1e-6)
    stage.embedder.embed = lambda frames: (_ for _ in ()).throw(RuntimeError("CUDA out of memory"))
    stage.process([transcoded])  # a failing batch fails its videos with the reason, never the run
    assert transcoded.failure is not None and "CUDA out of memory" in str(transcoded.failure)
    transcoded.failure = None  # the module's other tests read this task


@no_cuda
def test_vlm_captions_batched_equal_one_by_one_and_bf16_runs(tiny_blip, transcoded):
    from vfm_curator.captioners.vlm import VLMCaptioner

    clips = [c.samples for c in transcoded.clips] * 2  # 4 clips, batches of 3 then 1
    one = VLMCaptioner(tiny_blip, max_new_tokens=4)
    assert (one.device, one.dtype, one.batch_size) == ("cpu", torch.float32, 1)  # auto here: as before
    singles = [one.caption(frames) for frames in clips]
    batched = VLMCaptioner(tiny_blip, max_new_tokens=4, batch_size=3)
    assert batched.caption_many(iter(clips)) == singles
    prompted = VLMCaptioner(tiny_blip, max_new_tokens=4, batch_size=3, prompt="a picture of")
    assert prompted.caption_many(iter(clips)) == [prompted.caption(f) for f in clips]
    half = VLMCaptioner(tiny_blip, max_new_tokens=4, dtype="bf16", batch_size=2)
    assert next(half.model.parameters()).dtype == torch.bfloat16
    assert all(isinstance(t, str) for t in half.caption_many(iter(clips)))


def test_gpus_flag_validates_and_zero_pins_auto_devices_to_the_cpu(tiny_clip):
    cfg = CurateConfig.from_dict({"options": {"embed": {"embedder": "clip", "embedder_options": {"model_path": tiny_clip}},
                                              "caption": {"captioner": "vlm", "captioner_options": {"model_path": "m"}},
                                              "stitch": {"device": "auto"}, "transcode": {"encoder": "auto"}}})
    apply_gpus(cfg, 0)
    assert cfg.num_gpus == 0
    assert cfg.options["embed"]["embedder_options"] == {"model_path": tiny_clip, "device": "cpu"}
    assert cfg.options["caption"]["captioner_options"]["device"] == "cpu"
    assert (cfg.options["stitch"]["device"], cfg.options["transcode"]["encoder"]) == ("cpu", "libx264")
    assert cfg.options["decode"] == {"decoder": "pyav"}  # auto would measure (and pick) a GPU decoder
    plain = CurateConfig(options={"decode": {"decoder": "pyav"}, "transcode": {"encoder": "libx264"}})
    apply_gpus(plain, 0)  # histogram embedder, no captioner, named decoder and encoder: options untouched
    assert plain.options == {"decode": {"decoder": "pyav"}, "transcode": {"encoder": "libx264"}}
    assert plain.num_gpus == 0
    default = CurateConfig()
    apply_gpus(default, 0)  # the defaults: decoder and encoder auto, pinned to the CPU ones
    assert default.options == {"decode": {"decoder": "pyav"}, "transcode": {"encoder": "libx264"}}
    untouched = CurateConfig()
    apply_gpus(untouched, None)
    assert untouched.num_gpus is None
    with pytest.raises(ValueError, match=r"--gpus -1; accepted: an integer >= 0"):
        apply_gpus(CurateConfig(), -1)
    cluster = CurateConfig(ray_address="10.0.0.1:6379")
    apply_gpus(cluster, 2)  # a cluster's GPUs are Ray's to count, not this machine's
    assert cluster.num_gpus == 2


@no_cuda
def test_curate_gpus_above_zero_without_cuda_is_a_clear_error(tmp_path):
    result = CliRunner().invoke(app, ["curate", str(tmp_path), "-o", str(tmp_path / "o"), "--gpus", "1"])
    assert result.exit_code == 2
    text = " ".join(result.output.split())
    assert "--gpus 1 but no CUDA device is visible here" in text and "use --gpus 0" in text
    result = CliRunner().invoke(app, ["curate", str(tmp_path), "-o", str(tmp_path / "o"), "--gpus", "-3"])
    assert result.exit_code == 2 and "--gpus -3; accepted: an integer >= 0" in " ".join(result.output.split())


def test_curate_gpus_zero_writes_the_same_clips_as_without_the_flag(tmp_path):
    from vfm_curator.synth import make_video

    make_video(tmp_path / "in" / "a.mp4", [30, 26], seed=6)
    config = tmp_path / "c.toml"
    config.write_text('[run]\nrunner = "serial"\n[options.split]\nmin_clip_s = 0.5\n[options.write]\nthumbnails = false\n')
    clips = {}
    for name, extra in (("plain", []), ("zero", ["--gpus", "0"])):
        out = tmp_path / name
        result = CliRunner().invoke(app, ["curate", str(tmp_path / "in"), "-o", str(out), "--config", str(config),
                                          "--no-progress", *extra])
        assert result.exit_code == 0, result.output
        clips[name] = {p.name: p.read_bytes() for p in sorted((out / "clips").glob("*.mp4"))}
    assert len(clips["plain"]) == 2 and clips["zero"] == clips["plain"]  # same ids (spans), same bytes
