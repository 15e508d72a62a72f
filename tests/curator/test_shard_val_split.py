"""``val_fraction``: a clip goes to the val split when the SHA-256 of its source video's split key (its
content fingerprint; the clip id for a row without a video), as a fraction, is below it, with every other
clip of that video and every window of it (no leakage of a scene between the splits); val shards have
their own prefix per bucket, energon's split parts and blend.yaml list val only where it has shards; a
re-run or top-up never moves a video, and a changed fraction is refused. Real H264 clips from vfm
curate (several videos of several shots each), sharded with the pixel tokenizer."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

import vfm_curator
from tests.curator.val_split_clips import (
    FRACTION, FRAMES, SHOTS, SIZE, TOP_UP, add_video, clip_of, curate, curated_with_both_splits, keys_by_prefix,
    pick_videos, splits_by_video, video_ids, video_of,
)
from vfm_curator.pipelines.shard_split import PREFIXES, key_fraction, split_of
from vfm_curator.synth import make_video


@pytest.fixture(scope="module")
def curated(tmp_path_factory) -> tuple[Path, Path, list[str]]:
    return curated_with_both_splits(tmp_path_factory.mktemp("valsplit"))


def shard(clips: Path, out: Path, **options):
    return vfm_curator.shard(clips, out, {"run": {"runner": "serial"}}, tokenizer="pixel", text_encoder="hash",
                             resolutions=[list(SIZE)], frames=[FRAMES], windows=2, **options)


def test_every_clip_of_a_source_video_goes_to_one_split_with_all_its_windows(curated, tmp_path):
    _, clips, ids = curated
    videos = video_of(clips)
    summary = shard(clips, tmp_path / "s", val_fraction=FRACTION)
    where = keys_by_prefix(tmp_path / "s")
    assert {clip_of(k) for k in where} == set(ids) and len(where) == 2 * len(ids)  # two windows each
    by_video = splits_by_video(tmp_path / "s", videos)
    assert len(by_video) == 3 and all(len(prefixes) == 1 for prefixes in by_video.values()), by_video
    for key, prefix in where.items():  # the video's split key decides, not the clip id
        assert prefix == PREFIXES[split_of(videos[clip_of(key)], FRACTION)], key
    val = [i for i in ids if key_fraction(videos[i]) < FRACTION]
    assert (summary.val_clips, summary.train_clips, summary.val_samples) == (len(val), len(ids) - len(val), 2 * len(val))
    assert (summary.val_videos, summary.train_videos) == (1, 2)
    assert json.loads((tmp_path / "s" / "summary.json").read_text())["val_videos"] == 1
    assert not summary.notices and summary.split_key_fallbacks == {}  # every clip has its video's content key


def test_a_table_row_without_a_video_id_is_split_by_its_clip_id(curated, tmp_path):
    """Clip tables from other tools may lack ``video_id``: such a row falls back to its own id."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    _, clips, _ = curated
    other = tmp_path / "other"
    shutil.copytree(clips, other)
    table = pq.read_table(other / "clips.parquet")
    no_video = table.set_column(table.schema.get_field_index("video_id"), "video_id",
                                pa.nulls(len(table), type=table.schema.field("video_id").type))
    pq.write_table(no_video, other / "clips.parquet")
    summary = shard(other, tmp_path / "s", val_fraction=FRACTION)
    for key, prefix in keys_by_prefix(tmp_path / "s").items():
        assert prefix == PREFIXES[split_of(clip_of(key), FRACTION)], key
    assert summary.split_key_fallbacks == {"clip_id": len(table)}
    (notice,) = [n for n in summary.notices if "split key" in n]
    assert f"{len(table)} split by their own clip id (no video_id in the clip table:" in notice, notice


def test_a_clips_folder_copied_without_its_records_warns_once_that_the_split_follows_the_video_paths(curated, tmp_path):
    """Without ``.state/videos`` (a clips folder copied without it) every split key falls back to the
    table's ``video_id``, a hash of the source path, so the split would move with a moved video: one
    warning line, in the summary and summary.json, naming the count, the key and what keeps it stable."""
    _, clips, ids = curated
    copied = tmp_path / "copied"
    shutil.copytree(clips, copied, ignore=shutil.ignore_patterns(".state"))
    summary = shard(copied, tmp_path / "s", val_fraction=FRACTION)
    for key, prefix in keys_by_prefix(tmp_path / "s").items():  # the split is still by video: its path's hash
        assert prefix == PREFIXES[split_of(video_ids(clips)[clip_of(key)], FRACTION)], key
    (notice,) = [n for n in summary.notices if "split key" in n]
    assert notice.startswith(f"val split: the split key of {len(ids)} of {len(ids)} clips is not their source video's "
                             f"content (no fingerprint recorded in {copied / '.state' / 'videos'}): {len(ids)} split by "
                             "video_id (a hash of the source path"), notice
    assert "keep the clips folder's .state/videos records with its clips" in notice
    written = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert written["split_key_fallbacks"] == {"video_id": len(ids)} and notice in written["notices"]


def test_the_energon_splits_and_the_blend_give_train_and_val_disjoint_videos(curated, tmp_path):
    from vfm_data import make_loader
    from vfm_data.held_out import held_out_samples

    _, clips, ids = curated
    videos = video_of(clips)
    out = tmp_path / "s"
    shard(clips, out, val_fraction=FRACTION)
    (bucket,) = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    parts = yaml.safe_load((bucket / ".nv-meta" / "split.yaml").read_text())["split_parts"]
    assert sorted(parts) == ["train", "val"]
    assert all(n.startswith("val-") for n in parts["val"]) and all(n.startswith("shard-") for n in parts["train"])
    blend = yaml.safe_load((out / "blend.yaml").read_text())["splits"]
    n_val = sum(key_fraction(videos[i]) < FRACTION for i in ids)
    assert [e["weight"] for e in blend["val"]["blend"]] == [2.0 * n_val]
    assert [e["weight"] for e in blend["train"]["blend"]] == [2.0 * (len(ids) - n_val)]
    held = {clip_of(s.__key__) for s in held_out_samples(out / "blend.yaml", 1000, split_part="val")}
    loader = make_loader(out / "blend.yaml", patch_size=2, batch_size=1, seed=0)
    trained = set()
    for _, batch in zip(range(8 * len(ids)), loader):  # several epochs of the train split
        trained |= {clip_of(k) for k in batch.keys}
    assert held == {i for i in ids if split_of(videos[i], FRACTION) == "val"}
    assert trained == set(ids) - held  # every train clip read, and no val clip
    assert not {videos[i] for i in held} & {videos[i] for i in trained}  # and no video on both sides


def test_a_top_up_with_more_videos_keeps_every_old_clip_in_its_split_and_each_new_video_in_one(tmp_path):
    inputs, clips, ids = curated_with_both_splits(tmp_path)
    out = tmp_path / "s"
    shard(clips, out, val_fraction=FRACTION)
    before = keys_by_prefix(out)
    add_video(inputs, TOP_UP)
    more = curate(inputs, clips)
    summary = shard(clips, out, val_fraction=FRACTION)
    after, videos = keys_by_prefix(out), video_of(clips)
    assert set(more) > set(ids) and summary.skipped == len(ids) and summary.written == len(more) - len(ids)
    assert {k: after[k] for k in before} == before  # no old sample moved
    assert all(p == ("val" if split_of(videos[clip_of(k)], FRACTION) == "val" else "shard") for k, p in after.items())
    assert all(len(prefixes) == 1 for prefixes in splits_by_video(out, videos).values())


def test_a_video_recut_into_more_shots_puts_its_new_clips_into_the_split_it_had(tmp_path):
    """A source video rewritten at its path (same video id; other bytes, so another split key; new
    clip ids), curated and sharded again with --redo-changed: its new clips go where its old ones were
    (the folder knows the video by its id), not where their new split key would put them."""
    inputs, clips, ids = curated_with_both_splits(tmp_path)
    out = tmp_path / "s"
    shard(clips, out, val_fraction=FRACTION)
    had = splits_by_video(out, video_ids(clips))
    assert all(len(prefixes) == 1 for prefixes in had.values()) and len(set().union(*had.values())) == 2, had
    for mp4 in sorted(inputs.glob("*.mp4")):  # every video, now of more and other shots: one split key for all
        make_video(mp4, [14] * (SHOTS + 2), width=SIZE[1], height=SIZE[0], seed=77)
    curate_again = {"run": {"runner": "serial"}, "options": {"split": {"min_clip_s": 0.4}, "stitch": {"threshold": 1.0}}}
    vfm_curator.curate(inputs, clips, curate_again, redo_changed=True)
    videos = video_ids(clips)
    assert not set(videos) & set(ids) and set(videos.values()) == set(had)  # new clips, same videos
    assert len(set(video_of(clips).values())) == 1  # by their keys alone, all three would go to one side
    shard(clips, out, val_fraction=FRACTION, redo_changed=True)
    assert {clip_of(k) for k in keys_by_prefix(out)} == set(videos)
    assert splits_by_video(out, videos) == had


def test_a_changed_val_fraction_is_refused_naming_both_values_and_a_new_folder(curated, tmp_path):
    _, clips, _ = curated
    out = tmp_path / "s"
    shard(clips, out, val_fraction=FRACTION)
    before = keys_by_prefix(out)
    for now in (0.2, 0.0):
        with pytest.raises(ValueError) as refused:
            shard(clips, out, val_fraction=now)
        assert f"val_fraction: {FRACTION} there, {now} now" in str(refused.value)
        assert "move clips between the train and val splits" in str(refused.value) and "new output folder" in str(refused.value)
    assert keys_by_prefix(out) == before


def test_a_folder_sharded_before_val_fraction_existed_resumes_as_fraction_0(curated, tmp_path):
    _, clips, _ = curated
    out = tmp_path / "s"
    shard(clips, out)
    settings = out / "shard_config.json"
    older = {k: v for k, v in json.loads(settings.read_text()).items() if k != "val_fraction"}
    settings.write_text(json.dumps(older))  # as written before the option
    assert shard(clips, out).skipped > 0
    settings.write_text(json.dumps(older))
    with pytest.raises(ValueError, match=r"val_fraction: 0\.0 there, 0\.3 now"):
        shard(clips, out, val_fraction=FRACTION)


def test_fraction_0_writes_no_val_shard_and_only_a_train_split(curated, tmp_path):
    _, clips, ids = curated
    summary = shard(clips, tmp_path / "s")
    assert set(keys_by_prefix(tmp_path / "s").values()) == {"shard"}
    assert list(yaml.safe_load((tmp_path / "s" / "blend.yaml").read_text())["splits"]) == ["train"]
    (bucket,) = [p for p in (tmp_path / "s").iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert list(yaml.safe_load((bucket / ".nv-meta" / "split.yaml").read_text())["split_parts"]) == ["train"]
    assert (summary.val_clips, summary.val_samples, summary.train_clips) == (0, 0, len(ids)) and not summary.notices


def test_a_fraction_that_leaves_val_empty_warns_naming_the_count_and_the_fraction(curated, tmp_path):
    _, clips, ids = curated
    fraction = round(min(key_fraction(v) for v in video_of(clips).values()) / 2, 6)  # below every video's: none to val
    summary = shard(clips, tmp_path / "s", val_fraction=fraction)
    assert summary.val_clips == 0
    (notice,) = summary.notices
    assert f"val_fraction {fraction:g} put none of the {len(ids)} sharded clips in the val split" in notice
    assert f"all {len(ids)} sharded clips come from 3 videos; the split is by video" in notice


def test_the_clips_of_a_single_video_get_no_val_split_and_the_warning_says_the_split_is_by_video(tmp_path):
    inputs, clips = tmp_path / "in", tmp_path / "clips"
    inputs.mkdir()
    (n,) = pick_videos(inputs, train=1, val=0)
    add_video(inputs, n)
    ids = curate(inputs, clips)
    assert len(ids) > 1  # several shots: under a per-clip rule some would go to val
    summary = shard(clips, tmp_path / "s", val_fraction=FRACTION)
    assert (summary.val_clips, summary.train_clips) == (0, len(ids)) and set(keys_by_prefix(tmp_path / "s").values()) == {"shard"}
    (notice,) = summary.notices
    assert (f"val_fraction {FRACTION:g} put none of the {len(ids)} sharded clips in the val split: all {len(ids)} "
            "sharded clips come from 1 video; the split is by video") in notice
    assert "shard clips of more videos" in notice


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, float("nan"), "0.3"])
def test_a_val_fraction_outside_0_to_1_is_refused_naming_the_range(curated, tmp_path, bad):
    _, clips, _ = curated
    with pytest.raises(ValueError, match=r"0 <= val_fraction < 1"):
        shard(clips, tmp_path / "s", val_fraction=bad)
    assert not (tmp_path / "s").exists()


def test_a_killed_val_writer_leaves_no_temporary_shard(curated, tmp_path):
    from vfm_data.writer import temporary_prefix

    _, clips, _ = curated
    out = tmp_path / "s"
    shard(clips, out, val_fraction=FRACTION)
    (bucket,) = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    leftover = bucket / (temporary_prefix("val-000099.tar") + "x")
    shutil.copy(next(bucket.glob("val-*.tar")), leftover)  # what SIGKILL leaves: an unrenamed val shard
    shard(clips, out, val_fraction=FRACTION)
    assert not leftover.exists()


def test_clips_recaptioned_and_sharded_again_with_redo_changed_stay_in_their_split(tmp_path):
    inputs, clips, ids = curated_with_both_splits(tmp_path)
    out = tmp_path / "s"
    shard(clips, out, val_fraction=FRACTION)
    before = keys_by_prefix(out)
    for caption in inputs.glob("*.txt"):
        caption.write_text(caption.read_text() + ", described better")
    vfm_curator.curate(inputs, clips, {"run": {"runner": "serial"},
                                       "options": {"split": {"min_clip_s": 0.4}, "stitch": {"threshold": 1.0}}},
                       redo_changed=True)
    redo = shard(clips, out, val_fraction=FRACTION, redo_changed=True)
    assert redo.resharded == len(ids) and redo.samples_dropped == len(before)
    assert keys_by_prefix(out) == before  # every clip written anew, into the split it had
    (bucket,) = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    parts = yaml.safe_load((bucket / ".nv-meta" / "split.yaml").read_text())["split_parts"]
    assert sorted(parts) == ["train", "val"] and all(n.startswith("val-") for n in parts["val"])


def test_a_folder_whose_shards_are_all_val_is_bound_to_its_settings(curated, tmp_path):
    """A run that wrote no shard binds nothing (the next command takes the folder over), but val shards
    are shards: a folder holding only val shards is refused with other tokenizer settings like any other."""
    _, clips, ids = curated
    out = tmp_path / "s"
    everything = (1 + max(key_fraction(v) for v in video_of(clips).values())) / 2  # above every video's: all go to val
    summary = shard(clips, out, val_fraction=everything)
    assert summary.train_clips == 0 and set(keys_by_prefix(out).values()) == {"val"}
    with pytest.raises(ValueError, match=r"holds shards made with other settings \(tokenizer_options: \{\} there, \{'patch': 2\} now\)"):
        shard(clips, out, val_fraction=everything, tokenizer_options={"patch": 2})


def test_a_bucket_whose_index_is_gone_names_vfm_shard_again_which_indexes_val_apart_from_train(curated, tmp_path):
    """energon prepare --split-ratio 1,0,0 (the hint for other folders) would index val-*.tar as train."""
    from vfm_data.trust import UntrustedDatasetError, check_dataset

    _, clips, _ = curated
    out = tmp_path / "s"
    shard(clips, out, val_fraction=FRACTION)
    (bucket,) = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    shutil.rmtree(bucket / ".nv-meta")
    with pytest.raises(UntrustedDatasetError, match=rf"run vfm shard into {re.escape(str(out))} again .*val shards as train"):
        check_dataset(bucket)
    again = shard(clips, out, val_fraction=FRACTION)
    assert again.reindexed == [bucket.name]
    parts = yaml.safe_load((bucket / ".nv-meta" / "split.yaml").read_text())["split_parts"]
    assert sorted(parts) == ["train", "val"] and all(n.startswith("val-") for n in parts["val"])
