"""Bucket choice and the sharding configuration: shapes the tokenizer cannot take, unknown keys and
missing inputs are clear errors before any work starts."""

from __future__ import annotations

import pytest

import vfm_curator
from vfm_curator.pipelines.sharding import ShardConfig
from vfm_curator.stages.shard_decode import choose_frames, choose_resolution, cover_size


def test_a_clip_goes_to_the_resolution_nearest_its_aspect_ratio_and_the_longest_frame_count_it_fills():
    buckets = [[256, 256], [192, 320], [320, 192]]
    assert choose_resolution(1080, 1920, buckets) == (192, 320)
    assert choose_resolution(1920, 1080, buckets) == (320, 192)
    assert choose_resolution(500, 520, buckets) == (256, 256)
    assert choose_frames(40, [9, 17, 33]) == 33 and choose_frames(20, [9, 17, 33]) == 17 and choose_frames(5, [9]) is None


def test_cover_size_keeps_the_aspect_ratio_and_covers_the_target():
    for h, w, th, tw in [(1080, 1920, 192, 320), (64, 96, 48, 32), (40, 60, 64, 96), (33, 47, 16, 16)]:
        sh, sw = cover_size(h, w, th, tw)
        assert sh >= th and sw >= tw and (sh == th or sw == tw)
        assert abs(sw / sh - w / h) < 2.0 / min(sh, sw)


def test_bucket_shapes_the_tokenizer_cannot_take_are_refused_before_any_work(tmp_path):
    (tmp_path / "clips").mkdir()
    (tmp_path / "clips" / "clips.parquet").write_bytes(b"not parquet")
    with pytest.raises(ValueError, match="cannot read .*clips.parquet as a parquet table"):
        vfm_curator.shard(tmp_path / "clips", tmp_path / "o")
    with pytest.raises(ValueError, match=r"bucket 64x64x8 .* accepts 1 \+ k\*4 frames"):
        vfm_curator.shard(tmp_path / "clips", tmp_path / "o", {"run": {"runner": "serial"}}, tokenizer="causal3d",
                          frames=[8], resolutions=[[64, 64]], tokenizer_options={"base_channels": 8})
    with pytest.raises(ValueError, match="no clips.parquet"):
        vfm_curator.shard(tmp_path, tmp_path / "o")


def test_config_files_reject_unknown_keys_and_unknown_plugins(tmp_path):
    bad = tmp_path / "c.toml"
    bad.write_text('[shard]\ntokeniser = "pixel"\n')
    with pytest.raises(ValueError, match="unknown key.*tokeniser.*accepted:.*tokenizer"):
        ShardConfig.load(bad)
    good = tmp_path / "g.toml"
    good.write_text('[shard]\ntokenizer = "pixel"\nframes = [5]\n[run]\nrunner = "serial"\n')
    cfg = ShardConfig.load(good)
    assert (cfg.tokenizer, cfg.frames, cfg.execution.runner, cfg.execution.stages[0]) == ("pixel", [5], "serial", "shard_decode")
    with pytest.raises(ValueError, match="frame counts >= 2"):
        ShardConfig(frames=[1]).stage_specs()
    with pytest.raises(KeyError, match="hash"):  # the error lists the registered encoders
        vfm_curator.shard(tmp_path / "clips", tmp_path / "o", text_encoder="no-such-encoder")


def test_models_on_cuda_ask_ray_for_a_gpu_share_and_on_the_cpu_nothing_changes():
    # a Ray worker that declares no GPU sees no CUDA device: device = "cuda" must come with a share
    # (declaring it needs no GPU here; only running the stage would)
    on_gpu = {s.name: s.declared() for s in ShardConfig(device="cuda").stage_specs()}
    assert (on_gpu["shard_tokenize"].gpus, on_gpu["shard_text"].gpus) == (0.5, 0.5)
    assert on_gpu["shard_decode"].gpus == 0.0
    on_cpu = ShardConfig().stage_specs()
    assert all(s.declared() == s.cls.resources for s in on_cpu)
    with pytest.raises(ValueError, match="gpu_share = 0 is out of range"):
        ShardConfig.from_dict({"options": {"shard_text": {"gpu_share": 0}}}).stage_specs()
