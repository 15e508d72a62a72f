"""How ``vfm shard`` fits a clip to its bucket, seen by a user: a small clip is not blown up when a
smaller bucket of its shape is listed; the enlarging and centre-cropping of every clip written is
counted, recorded in its sample's metadata and warned about; ``max_upscale`` / ``max_crop`` refuse
clips past a limit (cause config, with the clip size, the bucket and the option); a re-run with other
bucket options says the clips sharded before keep their buckets. Real curated H264 clips, real shards."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import vfm_curator
from tests.curator.test_shard_pipeline import _samples as shard_samples
from vfm_curator.stages import shard_decode
from vfm_curator.synth import write_video

RED, GREEN, BLUE, WHITE = (220, 30, 30), (30, 200, 30), (30, 30, 220), (235, 235, 235)


def quadrants(height: int, width: int) -> np.ndarray:
    """Top-left red, top-right green, bottom-left blue, bottom-right white: orientation at a glance."""
    img = np.empty((height, width, 3), np.uint8)
    img[: height // 2, : width // 2], img[: height // 2, width // 2:] = RED, GREEN
    img[height // 2:, : width // 2], img[height // 2:, width // 2:] = BLUE, WHITE
    return img


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> Path:
    """``vfm curate`` output of a tiny 4:3 clip (12x16, HxW) and a 9:16 phone clip (64x36), captioned."""
    root = tmp_path_factory.mktemp("fit")
    rows = []
    for name, (h, w) in {"tiny": (12, 16), "phone": (64, 36)}.items():
        write_video(root / "in" / f"{name}.mp4", [quadrants(h, w)] * 8, fps=24.0)
        rows.append(json.dumps({"path": str(root / "in" / f"{name}.mp4"), "caption": f"quadrants {name}"}))
    (root / "in" / "manifest.jsonl").write_text("\n".join(rows) + "\n")
    out = root / "clips"
    summary = vfm_curator.curate([root / "in" / "manifest.jsonl"], out,
                                 {"run": {"runner": "serial"}, "options": {"split": {"min_clip_s": 0.1}}})
    assert summary.clips == 2
    return out


def _shard(clips: Path, out: Path, **shard) -> vfm_curator.pipelines.sharding.ShardSummary:
    config = {"run": {"runner": "serial"}, "shard": {"tokenizer": "pixel", "text_encoder": "hash", "frames": [5], **shard}}
    return vfm_curator.shard(clips, out, config)


def _samples(out: Path) -> dict[str, tuple[dict, np.ndarray]]:
    """source file name -> (metadata, latent (C, T, H, W)) of every sample in the shards."""
    return {Path(s["meta"]["source"]).name: (s["meta"], s["latent"].numpy()) for s in shard_samples(out).values()}


def test_a_clip_goes_to_the_largest_bucket_of_its_shape_it_fills_without_upscaling():
    buckets = [[256, 256], [128, 128], [144, 256], [72, 128]]
    assert shard_decode.choose_resolution(128, 128, buckets) == (128, 128)  # the first listed (256x256) used to win the tie
    assert shard_decode.choose_resolution(100, 100, buckets) == (128, 128)  # none fits: the least enlarging
    assert shard_decode.choose_resolution(640, 640, buckets) == (256, 256)
    assert shard_decode.choose_resolution(90, 160, buckets) == (72, 128) and shard_decode.choose_resolution(1080, 1920, buckets) == (144, 256)
    # max_upscale allows that much enlarging: the largest bucket within it
    assert shard_decode.choose_resolution(100, 100, buckets, max_upscale=3) == (256, 256)
    assert shard_decode.choose_resolution(100, 100, buckets, max_upscale=2) == (128, 128)
    # 4:3 is as far from 1:1 as from 16:9: the first listed shape wins, whatever the sizes
    assert shard_decode.choose_resolution(120, 160, [[256, 256], [144, 256]]) == (256, 256)
    assert shard_decode.choose_resolution(120, 160, [[144, 256], [256, 256]]) == (144, 256)


def test_bucket_and_limit_typos_are_value_errors_naming_the_accepted_form():
    for bad in ([256], [[256, 256.5]], [["a", 256]], [[True, 256]]):
        with pytest.raises(ValueError, match=r"resolutions must be .* e\.g\. \[\[256, 256\], \[144, 256\]\]"):
            shard_decode.check_buckets(bad, [17], 1)
    for bad in (17, [17.5], ["17"]):
        with pytest.raises(ValueError, match=r"frames must be .* e\.g\. \[17\]"):
            shard_decode.check_buckets([[256, 256]], bad, 1)
    with pytest.raises(ValueError, match=r"max_upscale must be a factor >= 1"):
        shard_decode.check_resize_limits(0.5, None)
    with pytest.raises(ValueError, match=r"max_crop must be a fraction of the frame in \[0, 1\)"):
        shard_decode.check_resize_limits(None, 1.0)


def test_enlarging_and_cropping_are_counted_recorded_per_sample_and_warned_about(clips, tmp_path):
    summary = _shard(clips, tmp_path / "s", resolutions=[[32, 32]])
    assert (summary.written, summary.failures) == (2, 0)
    # tiny 12x16 covers 32x32 at 32/12 = 2.67x (then 32x43, cropped); the phone clip is only cropped
    assert summary.upscaled == 1 and summary.most_upscale == pytest.approx(32 / 12)
    assert summary.most_upscaled == "tiny.mp4, 12x16 (HxW) -> bucket 32x32x5"
    assert summary.cropped == 2 and summary.most_crop == pytest.approx(1 - 32 / 57, abs=1e-6)  # phone: 36x64 -> 32x57
    assert summary.most_cropped == "phone.mp4, 64x36 (HxW) -> bucket 32x32x5"
    up, crop = summary.notices
    assert up.startswith("1 of the 2 clips written now were upscaled to fill their bucket, up to 2.7x (tiny.mp4")
    assert crop.startswith("2 of the 2 clips written now were centre-cropped to their bucket's aspect ratio, cutting up to 44%")
    samples = _samples(tmp_path / "s")
    assert samples["tiny.mp4"][0]["extra"]["upscale"] == pytest.approx(32 / 12, abs=1e-4)
    assert samples["phone.mp4"][0]["extra"]["crop"] == pytest.approx(1 - 32 / 57, abs=1e-4)
    on_disk = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert (on_disk["upscaled"], on_disk["cropped"]) == (1, 2)


def test_a_phone_clip_in_a_portrait_bucket_is_upright_unscaled_and_uncropped(clips, tmp_path):
    summary = _shard(clips, tmp_path / "s", resolutions=[[32, 32], [64, 36]], max_upscale=4, max_crop=0.3)
    assert set(summary.buckets) == {"32x32x5", "64x36x5"} and summary.notices == []
    meta, latent = _samples(tmp_path / "s")["phone.mp4"]
    assert latent.shape == (3, 5, 64, 36) and (meta["extra"]["upscale"], meta["extra"]["crop"]) == (1.0, 0.0)
    frame = ((latent[:, 0].transpose(1, 2, 0) + 1) * 127.5).round()  # pixel tokenizer: [-1, 1] pixels
    for (y, x), colour in {(8, 8): RED, (8, 28): GREEN, (56, 8): BLUE, (56, 28): WHITE}.items():
        assert np.abs(frame[y, x] - colour).max() < 24, ((y, x), frame[y, x], colour)


def test_max_upscale_and_max_crop_refuse_clips_with_the_size_bucket_and_option(clips, tmp_path):
    with pytest.raises(vfm_curator.NothingWrittenError, match="no sample written") as caught:  # both refused
        _shard(clips, tmp_path / "s", resolutions=[[32, 32]], max_upscale=2, max_crop=0.3)
    summary = caught.value.summary
    assert (summary.written, summary.failures) == (0, 2)
    failures = {Path(f["source"]).name: f for f in map(json.loads, (tmp_path / "s" / "failures.jsonl").read_text().splitlines())}
    tiny, phone = failures["tiny.mp4"], failures["phone.mp4"]
    assert (tiny["kind"], tiny["cause"], phone["kind"], phone["cause"]) == ("too-small", "config", "aspect-mismatch", "config")
    assert tiny["reason"] == ("too small: the 12x16 (HxW) clip would be upscaled 2.67x to fill its bucket 32x32, more than "
                              "max_upscale = 2; add a smaller resolution of its shape or raise max_upscale")
    assert phone["reason"].startswith("aspect ratio: the centre crop of the 64x36 (HxW) clip to its nearest bucket 32x32 "
                                      "would cut 44% of the frame, more than max_crop = 0.3")
    # the same folder with a portrait bucket and a looser limit: both are run again and written
    again = _shard(clips, tmp_path / "s", resolutions=[[32, 32], [64, 36]], max_upscale=3, max_crop=0.3)
    assert (again.retried, again.written, again.failures) == (2, 2, 0)


def test_a_rerun_with_other_buckets_says_the_clips_sharded_before_keep_theirs(clips, tmp_path):
    _shard(clips, tmp_path / "s", resolutions=[[32, 32]])
    again = _shard(clips, tmp_path / "s", resolutions=[[32, 32], [64, 36]])
    assert (again.skipped, again.written) == (2, 0)
    assert again.notices == ["resolutions [[32, 32]] -> [[32, 32], [64, 36]] since the last run into this folder: the 2 "
                             "clips sharded before keep their buckets and fitting (only new and failed clips use the new "
                             "options); shard into a new folder to re-bucket them all"]


def test_the_summary_says_how_many_seconds_each_stage_and_the_writer_took(clips, tmp_path):
    summary = _shard(clips, tmp_path / "s", resolutions=[[32, 32]])
    assert set(summary.stage_seconds) == {"shard_decode", "shard_tokenize", "shard_text", "write"}
    assert all(v > 0 for v in summary.stage_seconds.values()) and sum(summary.stage_seconds.values()) <= summary.wall_s
    assert json.loads((tmp_path / "s" / "summary.json").read_text())["stage_seconds"] == summary.stage_seconds
