"""Uncaptioned footage, the normal case, from `vfm curate` to `vfm train`: curate says how many clips
have no caption and what to do; `vfm shard` either fails loudly (the default: captions required,
exit 1 with one line) or, with --no-require-captions, writes unconditional shards that an
unconditional model trains on with `vfm train`. Never 0 samples and exit 0.

Real H264 videos made with PyAV, the real clipping and sharding pipelines (serial runner), real
energon shards, and the real trainer."""

from __future__ import annotations

import json
import math
import tarfile

import pytest
from typer.testing import CliRunner

from vfm_cli.main import app
from vfm_curator.synth import make_video

SHARD_TOML = """
[shard]
tokenizer = "pixel"
text_encoder = "hash"
resolutions = [[16, 24]]
frames = [4]
[run]
runner = "serial"
"""

TRAIN_TOML = """
[model]
family = "dit"            # class-free and text-free: num_classes = 0 from shards, no text encoder
preset = "tiny"
options = {{ hidden = 32, depth = 1, num_heads = 2, patch = [1, 4, 4] }}
formulation = "rectified-flow"
tokenizer = ""
[data]
source = "shards"
blend = "{blend}"
micro_batch = 2
workers = 0
[optim]
lr = 1e-3
warmup_steps = 1
[train]
steps = 3
seed = 0
out_dir = "{out}"
[checkpoint]
interval = 0
export = true
[logging]
interval = 1
tensorboard = false
loss_curve = false
progress = false
peak_tflops = 1.0
"""


def _invoke(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def curated(tmp_path_factory):
    """Three uncaptioned videos (no manifest, no sidecar) curated into one clip each."""
    root = tmp_path_factory.mktemp("uncaptioned")
    for i, name in enumerate("abc"):
        make_video(root / "in" / f"{name}.mp4", [14], width=48, height=32, seed=i)
    (root / "curate.toml").write_text('[run]\nrunner = "serial"\n[options.split]\nmin_clip_s = 0.4\n')
    (root / "shard.toml").write_text(SHARD_TOML)
    result = _invoke("curate", root / "in", "-o", root / "clips", "--config", root / "curate.toml", "--no-progress")
    assert result.exit_code == 0, result.output
    return root, result


def test_curate_says_how_many_clips_have_no_caption_and_what_to_do(curated):
    root, result = curated
    assert "captions: 3 of 3 clips have none." in result.output
    assert "vfm shard --no-require-captions" in result.output and "--captioner endpoint" in result.output
    report = (root / "clips" / "report.html").read_text()
    assert 'id="uncaptioned">3 kept clips have no caption.' in report
    assert "vfm shard --no-require-captions" in report and "0 of 3" in report


def test_shard_by_default_exits_1_with_one_line_naming_the_reason_then_unconditional_shards_train(curated, tmp_path):
    root, _ = curated
    shards = tmp_path / "shards"
    common = [root / "clips", "-o", shards, "--config", root / "shard.toml", "--no-progress"]

    failed = _invoke("shard", *common)
    assert failed.exit_code == 1, failed.output
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, failed.stderr
    assert "no sample written: 3 of 3 clips failed (no-caption)" in errors[0]
    assert "--no-require-captions" in errors[0]
    assert not list(shards.glob("*/shard-*.tar"))

    # the same folder with --no-require-captions: the no-caption failures are retried (their option changed)
    ok = _invoke("shard", *common, "--no-require-captions")
    assert ok.exit_code == 0, ok.output
    assert "error:" not in ok.stderr and "warning:" not in ok.stderr
    summary = json.loads((shards / "summary.json").read_text())
    # 3 clips of 14 frames, 3 windows of 4 frames each
    assert summary["samples"] == 9 and summary["failures"] == 0 and summary["retried"] == 3
    metas = []
    for shard in sorted(shards.glob("16x24x4/shard-*.tar")):
        with tarfile.open(shard) as tar:
            metas += [json.loads(tar.extractfile(m).read()) for m in tar.getmembers() if m.name.endswith(".json")]
    assert len(metas) == 9 and all(m["caption"] == "" and "caption_by" not in m["extra"] for m in metas)

    train_out = tmp_path / "train"
    config = tmp_path / "train.toml"
    config.write_text(TRAIN_TOML.format(blend=shards / "blend.yaml", out=train_out))
    trained = _invoke("train", config)
    assert trained.exit_code == 0, trained.output
    losses = [json.loads(line)["loss"] for line in (train_out / "metrics.jsonl").read_text().splitlines() if "loss" in line]
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses)
    meta = json.loads((train_out / "export" / "config.json").read_text())
    assert meta["family"] == "dit" and meta["config"]["num_classes"] == 0 and meta["text_encoder"] == ""
    assert meta["latent_shape"] == [3, 4, 16, 24]


def test_shard_warns_when_most_clips_fail_for_one_reason_and_writes_the_rest(curated, tmp_path):
    root, _ = curated
    src = tmp_path / "in"
    for i, name in enumerate("abc"):
        make_video(src / f"{name}.mp4", [14], width=48, height=32, seed=i)
    (src / "a.txt").write_text("a drifting colour field")  # one of three has a caption
    clips = tmp_path / "clips"
    assert _invoke("curate", src, "-o", clips, "--config", root / "curate.toml", "--no-progress").exit_code == 0
    result = _invoke("shard", clips, "-o", tmp_path / "shards", "--config", root / "shard.toml", "--no-progress")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "2 of 3 clips failed (no-caption)" in warnings[0], result.stderr
    assert json.loads((tmp_path / "shards" / "summary.json").read_text())["samples"] == 3  # 3 windows of its 14 frames


def test_shard_with_no_clip_in_the_table_exits_1(tmp_path, curated):
    root, _ = curated
    src = tmp_path / "in"
    src.mkdir()
    (src / "broken.mp4").write_bytes(b"not a video")
    clips = tmp_path / "clips"
    # curate exits 1 too (no clip written) but leaves its empty clip table, which shard then refuses
    assert _invoke("curate", src, "-o", clips, "--config", root / "curate.toml", "--no-progress").exit_code == 1
    assert (clips / "clips.parquet").is_file()
    result = _invoke("shard", clips, "-o", tmp_path / "shards", "--config", root / "shard.toml", "--no-progress",
                     "--no-require-captions")
    assert result.exit_code == 1 and "no sample written: the clip table lists no clips" in result.stderr
