"""Clips that changed in the clip table since they were sharded (vfm_curator.pipelines.shard_changes):
a re-run of `vfm shard` skipped them by id, so a re-curated or recaptioned clip kept its old samples
and a clip dropped from the table stayed in the shards that training reads."""

from __future__ import annotations

import json
import tarfile
import warnings
from pathlib import Path

import pyarrow.parquet as pq

import vfm_curator
from vfm_curator.pipelines.shard_index import disk_counts, indexed_counts
from vfm_curator.synth import make_video
from vfm_data import make_loader

SERIAL = {"run": {"runner": "serial"}}
SHARD = {"tokenizer": "pixel", "text_encoder": "hash", "resolutions": [[32, 48]], "frames": [9], "windows": 2,
         "max_shard_bytes": 400_000}  # 2 samples per clip (keys <id> and <id>-w1), a few shards


def _samples(shards: Path) -> dict[str, dict]:
    """key -> its json, over every finished shard."""
    found = {}
    for shard in sorted(shards.glob("*/shard-*.tar")):
        with tarfile.open(shard) as tar:
            for member in tar:
                if member.name.endswith(".json"):
                    found[member.name.split(".", 1)[0]] = json.loads(tar.extractfile(member).read())
    return found


def _curate(inputs: Path, out: Path, **kwargs) -> None:
    vfm_curator.curate(inputs, out, {**SERIAL, "options": {"split": {"min_clip_s": 0.4}, "stitch": {"threshold": 1.0}}},
                       **kwargs)


def _folder(tmp_path: Path) -> tuple[Path, Path]:
    for i in range(2):
        make_video(tmp_path / "in" / f"v{i}.mp4", [24, 24], width=48, height=32, seed=i)
        (tmp_path / "in" / f"v{i}.txt").write_text(f"video {i}")
    clips = tmp_path / "clips"
    _curate(tmp_path / "in", clips)
    return clips, tmp_path / "shards"


def test_a_recaptioned_clip_is_named_then_sharded_again_with_redo_changed(tmp_path):
    clips, shards = _folder(tmp_path)
    vfm_curator.shard(clips, shards, SERIAL, **SHARD)
    before = _samples(shards)
    assert len(before) == 8 and {s["caption"] for s in before.values()} == {"video 0", "video 1"}
    (tmp_path / "in" / "v1.txt").write_text("video 1, described better")
    _curate(tmp_path / "in", clips, redo_changed=True)

    kept = vfm_curator.shard(clips, shards, SERIAL, **SHARD)
    assert (kept.changed_since, kept.removed_since, kept.written) == (2, 0, 0)
    assert any("2 clips changed in the clip table since sharded" in n for n in kept.notices)
    assert _samples(shards) == before  # kept as they were until asked

    redo = vfm_curator.shard(clips, shards, SERIAL, redo_changed=True, **SHARD)
    assert (redo.resharded, redo.samples_dropped, redo.written, redo.samples) == (2, 4, 2, 8)
    after = _samples(shards)
    assert sorted(after) == sorted(before)  # every clip once, both windows
    assert sorted(s["caption"] for s in after.values()) == ["video 0"] * 4 + ["video 1, described better"] * 4
    bucket = shards / "32x48x9"  # energon's index was rebuilt for the rewritten shards, and the loader reads them
    assert indexed_counts(bucket) == disk_counts(bucket)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*pin_memory.*")
        loader = make_loader(shards / "blend.yaml", patch_size=2, batch_size=1, max_seq_len=8192, streams=1,
                             latent_channels=3, shuffle_buffer=None)
        assert {key for _ in range(16) for key in next(loader).keys} == set(after)
    assert loader.counts.get("corrupt", 0) == 0
    again = vfm_curator.shard(clips, shards, SERIAL, **SHARD)
    assert (again.changed_since, again.written, again.notices) == (0, 0, [])


def test_samples_of_clips_the_table_no_longer_lists_are_taken_out_with_redo_changed(tmp_path):
    clips, shards = _folder(tmp_path)
    vfm_curator.shard(clips, shards, SERIAL, **SHARD)
    make_video(tmp_path / "in" / "v0.mp4", [48], width=48, height=32, seed=9)  # re-exported as one shot
    _curate(tmp_path / "in", clips, redo_changed=True)

    kept = vfm_curator.shard(clips, shards, SERIAL, **SHARD)
    assert kept.removed_since == 2 and kept.written == 1  # v0's two old clips gone, its new one added

    redo = vfm_curator.shard(clips, shards, SERIAL, redo_changed=True, **SHARD)
    table = {r["id"] for r in pq.read_table(clips / "clips.parquet").to_pylist()}
    assert redo.samples_dropped == 4
    assert {s["extra"]["clip"] for s in _samples(shards).values()} == table
    assert redo.samples == 2 * len(table)


def test_clips_of_another_curated_folder_sharded_into_the_same_folder_are_not_taken_for_removed(tmp_path):
    clips, shards = _folder(tmp_path)
    make_video(tmp_path / "in2" / "w.mp4", [24, 24], width=48, height=32, seed=5)
    (tmp_path / "in2" / "w.txt").write_text("another folder's video")
    _curate(tmp_path / "in2", tmp_path / "clips2")
    vfm_curator.shard(clips, shards, SERIAL, **SHARD)
    first = _samples(shards)
    second = vfm_curator.shard(tmp_path / "clips2", shards, SERIAL, redo_changed=True, **SHARD)
    assert (second.removed_since, second.samples_dropped, second.written) == (0, 0, 2)
    assert set(first) < set(_samples(shards))  # the first folder's samples are all still there


def test_garbage_lines_in_the_ledger_are_skipped_also_one_nested_too_deep_for_json(tmp_path):
    clips, shards = _folder(tmp_path)
    vfm_curator.shard(clips, shards, SERIAL, **SHARD)
    with open(shards / ".state" / "sharded.jsonl", "a", encoding="utf-8") as ledger:
        ledger.write('garbage\n[1, 2]\n{"id": 5}\n{"id": "x", "stamp": 3}\n' + "[" * 100_000 + "\n")
    again = vfm_curator.shard(clips, shards, SERIAL, **SHARD)  # was a RecursionError traceback
    assert (again.changed_since, again.removed_since, again.written) == (0, 0, 0)


def test_a_link_planted_at_the_ledger_is_replaced_and_its_target_left_alone(tmp_path):
    clips, shards = _folder(tmp_path)
    vfm_curator.shard(clips, shards, SERIAL, **SHARD)
    shard = shards / "32x48x9" / "shard-000000.tar"
    before = shard.read_bytes()
    ledger = shards / ".state" / "sharded.jsonl"
    ledger.unlink()
    ledger.symlink_to("../32x48x9/shard-000000.tar")  # an output folder from elsewhere: lines went into a shard
    make_video(tmp_path / "in" / "v2.mp4", [24, 24], width=48, height=32, seed=2)
    (tmp_path / "in" / "v2.txt").write_text("video 2")
    _curate(tmp_path / "in", clips)
    assert vfm_curator.shard(clips, shards, SERIAL, **SHARD).written == 2
    assert shard.read_bytes() == before
    assert not ledger.is_symlink() and len(ledger.read_text().splitlines()) == 2


def test_a_clips_folder_moved_or_copied_elsewhere_is_not_named_changed_but_a_clip_with_other_bytes_is(tmp_path):
    import os
    import shutil

    clips, shards = _folder(tmp_path)
    vfm_curator.shard(clips, shards, SERIAL, **SHARD)
    moved = tmp_path / "elsewhere" / "clips"
    shutil.copytree(clips, moved)  # a fast disk, another mount: the same clips at another path
    for clip in (moved / "clips").glob("*.mp4"):
        os.utime(clip, ns=(1, 1))  # copied without keeping times (cp, rsync without -t)
    again = vfm_curator.shard(moved, shards, SERIAL, **SHARD)
    assert (again.changed_since, again.removed_since, again.written) == (0, 0, 0)
    first, second = sorted((moved / "clips").glob("*.mp4"))[:2]
    data = bytearray(first.read_bytes())
    data[len(data) // 3] ^= 0xFF  # the same size, other bytes (a stamp alone would miss it after the utime)
    first.write_bytes(bytes(data))
    os.utime(first, ns=(1, 1))
    assert vfm_curator.shard(moved, shards, SERIAL, **SHARD).changed_since == 1


def test_the_ledger_is_read_in_bounded_memory_however_long_a_garbage_line_is(tmp_path):
    import tracemalloc

    from vfm_curator.pipelines.shard_changes import ledger_path, sharded_stamps

    ledger = ledger_path(tmp_path)
    ledger.parent.mkdir(parents=True)
    good = json.dumps({"id": "c1", "stamp": [1, 2, "f", "r"]})
    with open(ledger, "wb") as fh:
        fh.write(b"x" * (64 << 20) + b"\n" + good.encode() + b"\n" + b"y" * (8 << 20))  # no newline at the end
    tracemalloc.start()
    try:
        assert sharded_stamps(tmp_path) == {"c1": [1, 2, "f", "r"]}
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20  # not the 64 MiB line held at once


def test_a_ledger_written_before_its_stamp_held_a_fingerprint_still_tells_a_recaptioned_clip(tmp_path):
    from vfm_curator.pipelines.clip_table import read_clip_table
    from vfm_curator.pipelines.shard_state import clip_stamp

    clips, shards = _folder(tmp_path)
    vfm_curator.shard(clips, shards, SERIAL, **SHARD)
    lines = [json.dumps({"id": t.id, "stamp": clip_stamp(t)}) for t in read_clip_table(clips)]  # the first format
    (shards / ".state" / "sharded.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "in" / "v1.txt").write_text("video 1, described better")
    _curate(tmp_path / "in", clips, redo_changed=True)
    assert vfm_curator.shard(clips, shards, SERIAL, **SHARD).changed_since == 2


def test_raising_windows_does_not_top_up_a_changed_clip_beside_its_old_windows(tmp_path):
    """A recaptioned clip not redone keeps its old samples as they are (named changed, skipped):
    windows of its new version beside them would give one clip two captions."""
    clips, shards = _folder(tmp_path)
    vfm_curator.shard(clips, shards, SERIAL, **{**SHARD, "windows": 1})
    (tmp_path / "in" / "v1.txt").write_text("video 1, described better")
    _curate(tmp_path / "in", clips, redo_changed=True)
    raised = vfm_curator.shard(clips, shards, SERIAL, **SHARD)
    assert (raised.changed_since, raised.topped_up, raised.skipped) == (2, 2, 2)
    assert any("--redo-changed" in n for n in raised.notices)
    samples = _samples(shards)
    by_clip: dict[str, set[str]] = {}
    for key, sample in samples.items():
        by_clip.setdefault(sample["extra"]["clip"], set()).add(sample["caption"])
    assert all(len(captions) == 1 for captions in by_clip.values())  # no clip with windows of two versions
    assert sorted(c for captions in by_clip.values() for c in captions) == ["video 0"] * 2 + ["video 1"] * 2
    redo = vfm_curator.shard(clips, shards, SERIAL, redo_changed=True, **SHARD)
    assert (redo.resharded, redo.samples) == (2, 8)
    assert sorted(s["caption"] for s in _samples(shards).values()) == ["video 0"] * 4 + ["video 1, described better"] * 4


def test_a_video_whose_every_clip_dedup_removed_has_its_samples_named_removed_and_taken_out(tmp_path):
    """Its video is gone from the clip table too, yet it is the same folder's: not another table's."""
    import shutil

    make_video(tmp_path / "in" / "v0.mp4", [30], width=48, height=32, seed=1)
    shutil.copy(tmp_path / "in" / "v0.mp4", tmp_path / "in" / "v1.mp4")  # its twin, with another caption
    make_video(tmp_path / "in" / "v2.mp4", [30], width=48, height=32, seed=5)
    for i in range(3):
        (tmp_path / "in" / f"v{i}.txt").write_text(f"video {i}")
    clips, shards = tmp_path / "clips", tmp_path / "shards"
    _curate(tmp_path / "in", clips)
    vfm_curator.shard(clips, shards, SERIAL, **SHARD)
    assert len(_samples(shards)) == 6
    vfm_curator.curate(tmp_path / "in", clips, {**SERIAL, "options": {"split": {"min_clip_s": 0.4}, "stitch": {"threshold": 1.0}},
                                                "dedup": {"enabled": True, "threshold": 0.99}})
    table = pq.read_table(clips / "clips.parquet").to_pylist()
    assert len(table) == 2 and len({r["source"] for r in table}) == 2  # one twin's only clip is gone, and its video

    kept = vfm_curator.shard(clips, shards, SERIAL, **SHARD)
    assert (kept.removed_since, kept.written) == (1, 0)
    redo = vfm_curator.shard(clips, shards, SERIAL, redo_changed=True, **SHARD)
    assert (redo.samples_dropped, redo.samples) == (2, 4)
    assert {s["extra"]["clip"] for s in _samples(shards).values()} == {r["id"] for r in table}


def test_a_video_whose_redo_fails_keeps_its_clips_in_the_table_and_its_samples_in_the_shards(tmp_path):
    """A failed --redo-changed replaces nothing (vfm_curator.io.state.record_failure): the table still
    lists the video's clips, so its samples are neither changed nor removed for vfm shard."""
    clips, shards = _folder(tmp_path)
    first = vfm_curator.shard(clips, shards, SERIAL, **SHARD)
    (tmp_path / "in" / "v0.mp4").write_bytes(b"no longer a video" * 100)
    _curate(tmp_path / "in", clips, redo_changed=True)
    assert {r["source"] for r in pq.read_table(clips / "clips.parquet").to_pylist()} == {
        str((tmp_path / "in" / name).resolve()) for name in ("v0.mp4", "v1.mp4")}
    kept = vfm_curator.shard(clips, shards, SERIAL, **SHARD)
    assert (kept.removed_since, kept.changed_since, kept.samples) == (0, 0, first.samples)


def test_samples_of_a_video_recurated_at_the_path_it_moved_to_are_named_removed(tmp_path):
    """A moved folder whose captions changed, clipped again with --redo-changed, leaves the folder
    without the old path's video (its record is deleted): its samples are still that folder's, not
    another table's, so they are named and taken out instead of staying beside the new version's."""
    import shutil

    clips, shards = _folder(tmp_path)
    vfm_curator.shard(clips, shards, SERIAL, **SHARD)
    shutil.move(tmp_path / "in", tmp_path / "moved")
    (tmp_path / "moved" / "v1.txt").write_text("video 1, described better")
    _curate(tmp_path / "moved", clips, redo_changed=True)

    kept = vfm_curator.shard(clips, shards, SERIAL, **SHARD)
    assert (kept.removed_since, kept.written) == (2, 2)  # v1's two old clips; its two new ones are new
    redo = vfm_curator.shard(clips, shards, SERIAL, redo_changed=True, **SHARD)
    assert (redo.samples_dropped, redo.samples) == (4, 8)
    assert sorted(s["caption"] for s in _samples(shards).values()) == ["video 0"] * 4 + ["video 1, described better"] * 4
