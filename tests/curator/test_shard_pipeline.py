"""The sharding pipeline end to end: curated synthetic videos (and an image) -> per-bucket shards that
energon's ``get_train_dataset`` and vfm-data's loader read; latents decode back to the frames the
pipeline fed the tokenizer (pixel: exactly); the blend file lists every bucket with its sample count;
bad clips go to failures.jsonl while the rest is written."""

from __future__ import annotations

import json
import tarfile
import warnings
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from megatron.energon import Cooker, DefaultTaskEncoder, WorkerConfig, get_savable_loader, get_train_dataset, stateless
from PIL import Image

import vfm_curator
import vfm_models
from vfm_curator.io.metadata import table
from vfm_curator.stages.shard_decode import load_frames
from vfm_curator.stages.shard_tokenize import to_frames, to_pixels
from vfm_curator.synth import make_video
from vfm_data import make_loader
from vfm_data.format import decode_array

RESOLUTIONS = [[64, 96], [48, 32]]  # (H, W): landscape 3:2 and portrait 2:3
FRAMES = [9, 17]
EXPECTED_BUCKETS = {"64x96x17": 2, "48x32x17": 1, "64x96x9": 1, "64x96x1": 1}


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> Path:
    """``vfm curate`` output of five generated videos plus one image row: a (2 shots) and b
    (portrait) and d (short) are fine, c has no caption, e's clip file gets corrupted."""
    root = tmp_path_factory.mktemp("shard")
    videos = {"a": ([30, 30], 96, 64), "b": ([20], 64, 96), "c": ([14], 96, 64), "d": ([12], 96, 64), "e": ([16], 96, 64)}
    for i, (name, (shots, w, h)) in enumerate(videos.items()):
        make_video(root / "in" / f"{name}.mp4", shots, width=w, height=h, seed=i)
        if name != "c":
            (root / "in" / f"{name}.txt").write_text(f"video {name}, a drifting colour pattern")
    out = root / "clips"
    vfm_curator.curate(root / "in", out, {"run": {"runner": "serial"}, "options": {"split": {"min_clip_s": 0.4}}})
    rows = pq.read_table(out / "clips.parquet").to_pylist()
    for r in rows:
        r["scores"] = dict(r["scores"])
        if Path(r["source"]).name == "e.mp4":
            (out / r["path"]).write_bytes(b"\x00not an mp4" * 50)
    image = (np.random.default_rng(0).uniform(0, 255, (40, 60, 3))).astype(np.uint8)
    Image.fromarray(image).save(out / "still.png")
    rows.append({**rows[0], "id": "image0", "path": "still.png", "source": "still.png", "caption": "a still image",
                 "num_frames": 1, "start_s": 0.0, "end_s": 0.0})
    pq.write_table(table(rows), out / "clips.parquet")
    return out


def _samples(out: Path) -> dict[str, dict]:
    """key -> {"bucket", "latent", "text", "meta"} read straight from the tar files."""
    found = {}
    for shard in sorted(out.glob("*/shard-*.tar")):
        with tarfile.open(shard) as tar:
            for member in tar.getmembers():
                key, part = member.name.split(".", 1)
                data = tar.extractfile(member).read()
                entry = found.setdefault(key, {"bucket": shard.parent.name})
                if part == "json":
                    entry["meta"] = json.loads(data)
                else:
                    entry[part.split(".")[0]] = decode_array(data, part.split(".")[1])
    return found


@pytest.fixture(scope="module")
def pixel_shards(clips, tmp_path_factory, ray_session) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("pixel") / "shards"
    summary = vfm_curator.shard(clips, out, tokenizer="pixel", text_encoder="hash", resolutions=RESOLUTIONS,
                                frames=FRAMES, tokenizer_options={"patch": 2}, patch_size=2)
    return out, summary


def test_pixel_shards_group_samples_into_buckets_and_list_failures(pixel_shards, clips):
    out, summary = pixel_shards
    samples = _samples(out)
    assert {b: n["samples"] for b, n in summary.buckets.items()} == EXPECTED_BUCKETS
    assert sorted(s["bucket"] for s in samples.values()) == sorted(b for b, n in EXPECTED_BUCKETS.items() for _ in range(n))
    failures = [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines()]
    by_source = {Path(f["source"]).name: f for f in failures}
    assert set(by_source) == {"c.mp4", "e.mp4"} and summary.failures == 2
    assert by_source["c.mp4"]["stage"] == "caption" and "no caption" in by_source["c.mp4"]["reason"]
    assert by_source["e.mp4"]["stage"] == "shard_decode"
    image = samples["image0"]
    assert image["meta"]["modality"] == "image" and image["latent"].shape == (12, 1, 32, 48)
    assert all(s["meta"]["modality"] == "video" for k, s in samples.items() if k != "image0")
    for s in samples.values():  # text: real tokens of the caption, as the text encoder gives them
        emb, mask = vfm_models.get_text_encoder("hash")().encode([s["meta"]["caption"]])
        assert torch.equal(s["text"], emb[0, : int(mask.sum())])
    # summary figures agree with what is on disk
    assert summary.samples == len(samples) == summary.written
    assert summary.bytes == sum(p.stat().st_size for p in out.glob("*/shard-*.tar"))
    assert summary.buckets["64x96x17"]["tokens"] == 2 * 17 * (32 // 2) * (48 // 2)
    assert summary.workers and set(summary.workers) == {"shard_decode", "shard_tokenize", "shard_text"}


def test_pixel_latents_decode_exactly_to_the_frames_fed_to_the_tokenizer(pixel_shards, clips):
    out, _ = pixel_shards
    tokenizer = vfm_models.get_tokenizer("pixel")(patch=2)
    rows = {r["id"]: r for r in pq.read_table(clips / "clips.parquet").to_pylist()}
    for key, s in _samples(out).items():
        h, w, t = (int(v) for v in s["bucket"].split("x"))
        decoded = to_frames(tokenizer.decode(s["latent"][None]))[0]  # (T, H, W, 3) uint8
        fed = load_frames(str(clips / rows[key]["path"]), h, w, t)
        assert decoded.shape == (t, h, w, 3) and np.array_equal(decoded, fed), key
        if s["bucket"].startswith("64x96") and s["meta"]["modality"] == "video":
            # these clips are 64x96 already: no resize, so the frames are the clip's own decoded frames
            # (the curator's YUV -> RGB, io.video.iter_frames: exact, where PyAV's default truncates)
            from vfm_curator.io.video import iter_frames

            raw = np.stack([f for _, (_, f) in zip(range(t), iter_frames(str(clips / rows[key]["path"])))])
            assert np.array_equal(decoded, raw), key


@stateless
def _identity(raw):
    return raw


class _Crude(DefaultTaskEncoder):
    """Stock energon with no decoding: raw tar members per sample."""

    decoder = None
    cookers = [Cooker(_identity)]


def _energon_samples(path: Path, take: int | None = None) -> list[dict]:
    """Every sample of a dataset folder, or the first ``take`` of a blend (energon blends by weight
    only when repeating)."""
    ds = get_train_dataset(path, worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0), batch_size=None,
                           shuffle_buffer_size=None, max_samples_per_sequence=None, task_encoder=_Crude(),
                           repeat=take is not None)
    return [s for s, _ in zip(get_savable_loader(ds), range(take or 1 << 30))]


def test_each_bucket_loads_with_stock_energon_get_train_dataset(pixel_shards):
    out, summary = pixel_shards
    for bucket, info in summary.buckets.items():
        samples = _energon_samples(out / bucket)
        assert len(samples) == info["samples"]
        assert {json.loads(s["json"])["extra"]["bucket"] for s in samples} == {bucket}


def test_blend_file_lists_every_bucket_with_its_sample_count_and_the_vfm_loader_reads_it(pixel_shards):
    out, summary = pixel_shards
    doc = yaml.safe_load((out / "blend.yaml").read_text())
    entries = {Path(e["path"]).name: e["weight"] for e in doc["splits"]["train"]["blend"]}
    assert entries == {b: float(n) for b, n in EXPECTED_BUCKETS.items()}
    assert json.loads((out / "buckets.json").read_text()) == summary.buckets
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*pin_memory.*")
        loader = make_loader(out / "blend.yaml", patch_size=2, batch_size=1, max_seq_len=8192, streams=1,
                             latent_channels=12, shuffle_buffer=None)
        seen = {}
        for _ in range(12):
            batch = next(loader)
            for key, grid in zip(batch.keys, batch.grids):
                seen[key] = tuple(grid)
    all_keys = set(_samples(out))
    assert set(seen) <= all_keys and len(seen) >= 3
    assert seen.get("image0", (1, 16, 24)) == (1, 16, 24)
    assert loader.counts.get("corrupt", 0) == 0


def test_causal3d_shards_hold_its_latents_and_decode_to_the_clip_shape(clips, tmp_path, ray_session):
    torch.manual_seed(0)
    options = {"base_channels": 8, "latent_channels": 4, "temporal_compression": 4, "spatial_compression": 8}
    reference = vfm_models.get_tokenizer("causal3d")(**options).eval()
    reference.save(tmp_path / "c3d.safetensors")
    out = tmp_path / "shards"
    summary = vfm_curator.shard(clips, out, tokenizer="causal3d", text_encoder="hash", resolutions=RESOLUTIONS,
                                frames=FRAMES, tokenizer_options={**options, "weights": str(tmp_path / "c3d.safetensors")})
    assert {b: n["samples"] for b, n in summary.buckets.items()} == EXPECTED_BUCKETS
    rows = {r["id"]: r for r in pq.read_table(clips / "clips.parquet").to_pylist()}
    for key, s in _samples(out).items():
        h, w, t = (int(v) for v in s["bucket"].split("x"))
        fed = load_frames(str(clips / rows[key]["path"]), h, w, t)
        with torch.inference_mode():
            expected = reference.encode(to_pixels(fed[None]))[0]
            decoded = reference.decode(s["latent"][None])
        assert s["latent"].shape == (4, 1 + (t - 1) // 4, h // 8, w // 8)
        torch.testing.assert_close(s["latent"], expected, rtol=1e-4, atol=1e-5)
        assert decoded.shape == (1, 3, t, h, w)
        assert s["meta"]["tokenizer"] == "causal3d"
    blended = _energon_samples(out / "blend.yaml", take=60)  # the blend file, through stock energon
    assert {s["__key__"] for s in blended} == set(_samples(out))  # weights 2:1:1:1:1 reach every sample
