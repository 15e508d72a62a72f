"""The val split follows a source video's content, not its path: a video moved, renamed or curated
again elsewhere keeps its side; each sample names its video and split key so a reader can audit the
split; ``shard_config.json`` records the rule, and a folder split by another rule is not topped up
(one written before the rule was recorded tops up, every video it holds keeping its side). Real
H264 videos through vfm curate, sharded with the pixel tokenizer."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest

import vfm_curator
from tests.curator.val_split_clips import (
    FRACTION, FRAMES, SIZE, TOP_UP, add_video, clip_of, curate, curated_with_both_splits, keys_by_prefix,
    splits_by_video, video_ids, video_of,
)
from vfm_curator.pipelines.shard_split import PREFIXES, SPLIT_RULE, split_of
from vfm_curator.synth import make_video
from vfm_curator.tasks import video_id

def shard(clips: Path, out: Path, **options):
    return vfm_curator.shard(clips, out, {"run": {"runner": "serial"}}, tokenizer="pixel", text_encoder="hash",
                             resolutions=[list(SIZE)], frames=[FRAMES], windows=2, val_fraction=FRACTION, **options)


def side_by_name(out: Path, clips: Path) -> dict[str, set[str]]:
    """source file name -> the shard prefixes its samples are in."""
    import pyarrow.parquet as pq

    name = {r["id"]: Path(r["source"]).name for r in pq.read_table(clips / "clips.parquet").to_pylist()}
    return splits_by_video(out, name)


def sample_metas(out: Path) -> dict[str, tuple[str, dict]]:
    """sample key -> (shard prefix, its json)."""
    found = {}
    for tar_path in sorted(out.glob("*/*.tar")):
        with tarfile.open(tar_path) as tar:
            for member in tar:
                if member.name.endswith(".json"):
                    found[member.name.split(".", 1)[0]] = (tar_path.name.split("-", 1)[0], json.load(tar.extractfile(member)))
    return found


def test_a_video_moved_and_curated_again_elsewhere_keeps_its_split(tmp_path):
    inputs, clips, _ = curated_with_both_splits(tmp_path / "first")
    first = side_by_name(shard(clips, tmp_path / "s1") and tmp_path / "s1", clips)
    # a new place whose paths would move a video to the other side under a split by the path's id
    for n in range(100):
        moved = tmp_path / f"elsewhere{n}" / "videos"
        if any(split_of(video_id(str(moved / p.name)), FRACTION) != split_of(video_id(str(p.resolve())), FRACTION)
               for p in inputs.glob("*.mp4")):
            break
    moved.parent.mkdir()
    shutil.move(inputs, moved)
    again = moved.parent / "clips"
    curate(moved, again)
    assert not set(video_ids(again).values()) & set(video_ids(clips).values())  # other video ids: other paths
    assert side_by_name(shard(again, tmp_path / "s2") and tmp_path / "s2", again) == first


def test_each_sample_names_its_video_id_and_split_key_and_no_key_has_samples_in_both_splits(tmp_path):
    from vfm_data.format import SampleMeta

    _, clips, ids = curated_with_both_splits(tmp_path)
    out = tmp_path / "s"
    shard(clips, out)
    metas, vids, keys = sample_metas(out), video_ids(clips), video_of(clips)
    assert {clip_of(k) for k in metas} == set(ids)
    sides: dict[str, set[str]] = {}
    for key, (prefix, meta) in metas.items():
        extra = meta["extra"]
        assert extra["video_id"] == vids[clip_of(key)] and extra["split_key"] == keys[clip_of(key)]
        assert extra["split_key"].startswith("content:")
        assert prefix == PREFIXES[split_of(extra["split_key"], FRACTION)]  # the rule shard_config.json names
        sides.setdefault(extra["split_key"], set()).add(prefix)
        assert SampleMeta.from_json(meta).extra["split_key"] == extra["split_key"]  # a reader keeps what it does not use
    assert len(sides) == 3 and all(len(p) == 1 for p in sides.values())


def test_shard_config_records_the_split_rule_the_fraction_and_what_is_hashed(tmp_path):
    _, clips, _ = curated_with_both_splits(tmp_path)
    shard(clips, tmp_path / "s")
    recorded = json.loads((tmp_path / "s" / "shard_config.json").read_text())
    assert (recorded["split_rule"], recorded["val_fraction"]) == (SPLIT_RULE, FRACTION)
    assert "extra.split_key" in recorded["split_hashes"] and "fingerprint" in recorded["split_hashes"]


def test_a_folder_split_by_another_rule_is_refused_naming_both_rules(tmp_path):
    _, clips, _ = curated_with_both_splits(tmp_path)
    out = tmp_path / "s"
    shard(clips, out)
    before = keys_by_prefix(out)
    settings = out / "shard_config.json"
    settings.write_text(json.dumps({**json.loads(settings.read_text()), "split_rule": "source-path/0"}))
    with pytest.raises(ValueError) as refused:
        shard(clips, out)
    assert f"split_rule: 'source-path/0' there, '{SPLIT_RULE}' now" in str(refused.value)
    assert "new output folder" in str(refused.value) and "the vfm that made it" in str(refused.value)
    assert keys_by_prefix(out) == before


def test_a_folder_written_before_the_rule_was_recorded_tops_up_each_video_keeping_its_side(tmp_path):
    """The old code's files: no split_rule in shard_config.json, ledger lines without video_id,
    split_key and split (the samples' own are not read). A top-up with a new video and every old video
    re-cut (--redo-changed: new bytes, new clip ids, the same video ids) keeps each old video on its side."""
    inputs, clips, _ = curated_with_both_splits(tmp_path)
    out = tmp_path / "s"
    shard(clips, out)
    settings = out / "shard_config.json"
    settings.write_text(json.dumps({k: v for k, v in json.loads(settings.read_text()).items()
                                    if k not in ("split_rule", "split_hashes")}))
    ledger = out / ".state" / "sharded.jsonl"
    ledger.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k in ("id", "stamp", "source")}) + "\n"
                              for line in ledger.read_text().splitlines()))
    had = side_by_name(out, clips)
    assert set().union(*had.values()) == {"shard", "val"} and all(len(p) == 1 for p in had.values()), had
    for mp4 in sorted(inputs.glob("*.mp4")):  # re-cut: new bytes (one split key for all three), the same video ids
        make_video(mp4, [14] * 7, width=SIZE[1], height=SIZE[0], seed=77)
    add_video(inputs, TOP_UP)
    vfm_curator.curate(inputs, clips, {"run": {"runner": "serial"},
                                       "options": {"split": {"min_clip_s": 0.4}, "stitch": {"threshold": 1.0}}},
                       redo_changed=True)
    shard(clips, out, redo_changed=True)
    now = side_by_name(out, clips)
    assert {name: now[name] for name in had} == had and all(len(p) == 1 for p in now.values())
    assert json.loads(settings.read_text())["split_rule"] == SPLIT_RULE  # recorded now: it tops up by this rule
