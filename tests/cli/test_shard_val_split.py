"""End to end: real H264 videos -> ``vfm curate`` -> ``vfm shard --val-fraction 0.3`` -> ``vfm train`` with
``[validation]`` on the shards' val split: the held-out loss is logged, the clips trained on and the
held-out ones come from disjoint source videos, and a top-up with more clips keeps every old clip in
its split."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from tests.cli.one_thread import one_thread_quiet_loader  # noqa: F401 (autouse)
from tests.curator.val_split_clips import (
    FRACTION, SIZE, TOP_UP, add_video, clip_ids, clip_of, curated_with_both_splits, keys_by_prefix, video_of,
)
from vfm_cli.main import app
from vfm_curator.pipelines.shard_split import split_of


def _invoke(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "300"})  # rich wraps errors at the width


def _curate(inputs: Path, clips: Path) -> list[str]:
    config = inputs.parent / "curate.toml"  # as the curator tests cut the 12-frame shots
    config.write_text('[run]\nrunner = "serial"\n[options.split]\nmin_clip_s = 0.4\n[options.stitch]\nthreshold = 1.0\n')
    result = _invoke("curate", inputs, "-o", clips, "--config", config, "--no-progress")
    assert result.exit_code == 0, result.output
    return clip_ids(clips)


def _shard(clips: Path, out: Path, fraction: float):
    return _invoke("shard", clips, "-o", out, "--tokenizer", "pixel", "--text-encoder", "hash", "--runner", "serial",
                   "--resolution", f"{SIZE[0]}x{SIZE[1]}", "--frames", "5", "--windows", "2", "--val-fraction", fraction,
                   "--no-progress")


def _train_config(tmp_path: Path, shards: Path) -> Path:
    config = tmp_path / "train.toml"
    config.write_text(f"""
[model]
family = "dit-cross"
preset = "tiny"
options = {{ hidden = 32, depth = 1, num_heads = 2, patch = [1, 4, 4] }}
[data]
source = "shards"
blend = "{shards}"
micro_batch = 1
[train]
steps = 2
out_dir = "{tmp_path / 'run'}"
[optim]
warmup_steps = 0
[checkpoint]
interval = 0
[validation]
interval = 1
split = "val"
samples = 2
levels = 2
[logging]
progress = false
tensorboard = false
loss_curve = false
peak_tflops = 1.0
""")
    return config


def test_curate_shard_with_a_val_fraction_and_train_with_validation_on_its_val_split(tmp_path):
    from vfm_data import make_loader
    from vfm_data.held_out import held_out_samples

    inputs, clips, ids = curated_with_both_splits(tmp_path, curate=_curate)
    shards = tmp_path / "shards"
    sharded = _shard(clips, shards, FRACTION)
    assert sharded.exit_code == 0, sharded.output
    videos = video_of(clips)
    val_ids = {i for i in ids if split_of(videos[i], FRACTION) == "val"}
    assert re.search(rf"held out for val \(clips, samples\)\s+│\s+{len(val_ids)} of {len(ids)} clips "
                     rf"\(\d+%; 1 of 3 videos, val_fraction 0.3\)", sharded.output)

    result = _invoke("train", _train_config(tmp_path, shards))
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "val_loss" in r] == [1, 2] and all(r["val_loss"] > 0 for r in rows if "val_loss" in r)
    assert json.loads((tmp_path / "run" / "validation.json").read_text())["clips"] == min(2, 2 * len(val_ids))

    # what vfm train reads: the blend's train split (its loader) and its val split (held_out_samples)
    blend = shards / "blend.yaml"
    held = {clip_of(s.__key__) for s in held_out_samples(blend, 1000, split_part="val")}
    trained = set()
    for _, batch in zip(range(8 * len(ids)), make_loader(blend, patch_size=4, batch_size=1, seed=0)):
        trained |= {clip_of(k) for k in batch.keys}
    assert held == val_ids and trained == set(ids) - val_ids
    assert not {videos[i] for i in held} & {videos[i] for i in trained}  # no source video on both sides

    before = keys_by_prefix(shards)
    add_video(inputs, TOP_UP)
    more = _curate(inputs, clips)
    topped = _shard(clips, shards, FRACTION)
    assert topped.exit_code == 0, topped.output
    after = keys_by_prefix(shards)
    assert len(more) > len(ids) and {k: after[k] for k in before} == before
    videos = video_of(clips)
    assert all(p == ("val" if split_of(videos[clip_of(k)], FRACTION) == "val" else "shard") for k, p in after.items())


def test_a_changed_val_fraction_is_one_error_line_naming_both_values(tmp_path):
    inputs, clips, shards = tmp_path / "in", tmp_path / "clips", tmp_path / "shards"
    add_video(inputs, 0)
    _curate(inputs, clips)
    assert _shard(clips, shards, FRACTION).exit_code == 0
    changed = _shard(clips, shards, 0.5)
    assert changed.exit_code == 1 and "Traceback" not in changed.output
    assert "val_fraction: 0.3 there, 0.5 now" in changed.output and "new output folder" in changed.output


def test_a_val_fraction_of_1_is_refused_naming_the_option(tmp_path):
    refused = _shard(tmp_path, tmp_path / "shards", 1.0)
    assert refused.exit_code == 2 and "--val-fraction" in refused.output and "0 <= val_fraction < 1" in refused.output
