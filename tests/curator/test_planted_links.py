"""A symbolic link planted in an output folder at a name a curator writer writes, renames into place or
deletes (an output folder from elsewhere holding ``balancer.jsonl -> ~/.bashrc``, or
``clips/<id>.mp4 -> <another id>.mp4``) is replaced or removed itself, never the file it points to."""

from __future__ import annotations

import json
import os

import pyarrow.parquet as pq
import pytest
import torch

import vfm_curator

from tests.planted_links import plant_link
from vfm_curator.io import commits, staging
from vfm_curator.io.paths import append_line, output_path
from vfm_curator.pipelines import shard_state
from vfm_curator.shot_detectors.transnetv2 import load_weights, save_weights
from vfm_curator.shot_detectors.transnetv2_model import TransNetV2
from vfm_curator.synth import make_video
from vfm_curator.tasks import video_id
from vfm_plugins.files import SwappedFileError

SERIAL = {"run": {"runner": "serial"}}


def test_an_appended_log_replaces_a_link_at_its_name_then_appends_to_its_own_file(tmp_path):
    out = tmp_path / "out"
    victim = plant_link(out / "balancer.jsonl", tmp_path / "home")
    append_line(out / "balancer.jsonl", '{"step": 1}')
    append_line(out / "balancer.jsonl", '{"step": 2}')
    assert victim.read_text() == "precious" and not (out / "balancer.jsonl").is_symlink()
    assert (out / "balancer.jsonl").read_text() == '{"step": 1}\n{"step": 2}\n'


def test_transnetv2_weights_replace_a_link_at_their_name_and_leave_its_target_alone(tmp_path):
    path = tmp_path / "out" / "transnetv2.safetensors"
    victim = plant_link(path, tmp_path / "home")
    model = TransNetV2()
    save_weights(model, path)
    assert victim.read_text() == "precious" and not path.is_symlink()
    other = TransNetV2()
    load_weights(other, path)
    assert all(torch.equal(other.state_dict()[k], v) for k, v in model.state_dict().items())


def _clipped_twice(tmp_path):
    """``in/a.mp4`` (two shots) and ``in/b.mp4`` clipped into ``out``; returns out, a's video id and
    clip ids, b's clip id."""
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    make_video(tmp_path / "in" / "b.mp4", [30], seed=2)
    out = tmp_path / "out"
    vfm_curator.curate(tmp_path / "in", out, SERIAL)
    rows = pq.read_table(out / "clips.parquet").to_pylist()
    a_rows = [r for r in rows if r["source"].endswith("a.mp4")]
    b_clip = next(r["id"] for r in rows if r["source"].endswith("b.mp4"))
    return out, a_rows[0]["video_id"], [r["id"] for r in a_rows], b_clip


def _forget(out, vid, clip_ids):
    """The folder as if video ``vid`` was never clipped: its record, part, clips and thumbnails gone."""
    for path in [out / ".state" / "videos" / f"{vid}.json", out / ".state" / "parts" / f"{vid}.parquet",
                 *(out / "clips" / f"{c}.mp4" for c in clip_ids), *(out / "thumbs" / f"{c}.jpg" for c in clip_ids)]:
        path.unlink(missing_ok=True)


def test_a_link_planted_at_a_new_clips_name_is_replaced_and_the_clip_it_points_to_is_left_intact(tmp_path):
    out, a_vid, (a1, a2), b_clip = _clipped_twice(tmp_path)
    b_bytes, b_thumb = (out / "clips" / f"{b_clip}.mp4").read_bytes(), (out / "thumbs" / f"{b_clip}.jpg").read_bytes()
    _forget(out, a_vid, [a1, a2])
    # an output folder from elsewhere: a's clip and thumbnail names are links to b's files
    (out / "clips" / f"{a1}.mp4").symlink_to(f"{b_clip}.mp4")
    (out / "thumbs" / f"{a1}.jpg").symlink_to(f"{b_clip}.jpg")
    summary = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    assert (summary.processed, summary.failures, summary.clips) == (1, 0, 3)
    assert (out / "clips" / f"{b_clip}.mp4").read_bytes() == b_bytes
    assert (out / "thumbs" / f"{b_clip}.jpg").read_bytes() == b_thumb
    for name in (f"clips/{a1}.mp4", f"thumbs/{a1}.jpg"):
        assert (out / name).is_file() and not (out / name).is_symlink()
    assert (out / "clips" / f"{a1}.mp4").read_bytes() != b_bytes


def test_a_link_out_of_the_folder_at_a_new_clips_name_is_replaced_and_the_run_goes_on(tmp_path):
    """The link's target is outside: it was refused (ValueError), which failed the video; now the
    link itself is replaced, and the file it points to is left alone."""
    out, a_vid, (a1, a2), b_clip = _clipped_twice(tmp_path)
    _forget(out, a_vid, [a1, a2])
    victim = plant_link(out / "clips" / f"{a2}.mp4", tmp_path / "home")
    summary = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    assert (summary.processed, summary.failures, summary.clips) == (1, 0, 3)
    assert victim.read_text() == "precious"
    assert (out / "clips" / f"{a2}.mp4").is_file() and not (out / "clips" / f"{a2}.mp4").is_symlink()


def test_a_link_planted_at_a_videos_record_name_is_replaced_and_the_record_it_points_to_is_left_intact(tmp_path):
    out, a_vid, a_clips, b_clip = _clipped_twice(tmp_path)
    b_vid = pq.read_table(out / "clips.parquet").to_pylist()[-1]["video_id"]
    records = out / ".state" / "videos"
    b_record = (records / f"{b_vid}.json").read_bytes()
    (records / f"{a_vid}.json").unlink()
    (records / f"{a_vid}.json").symlink_to(f"{b_vid}.json")  # a's record reads as b's: a is clipped again
    summary = vfm_curator.curate(tmp_path / "in", out, SERIAL, redo_changed=True)
    assert (summary.failures, summary.clips) == (0, 3)
    assert (records / f"{b_vid}.json").read_bytes() == b_record
    assert not (records / f"{a_vid}.json").is_symlink()
    assert json.loads((records / f"{a_vid}.json").read_text())["source"].endswith("a.mp4")


def test_a_link_out_of_the_folder_at_a_videos_record_name_is_replaced_not_a_traceback(tmp_path):
    """The record is written outside the write stage's guard (after it, and by the driver): a refused
    link there ended the whole run with a ValueError."""
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    out = tmp_path / "out"
    vid = video_id(str((tmp_path / "in" / "a.mp4").resolve()))
    victim = plant_link(out / ".state" / "videos" / f"{vid}.json", tmp_path / "home")
    summary = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    assert (summary.processed, summary.failures, summary.clips) == (1, 0, 2)
    assert victim.read_text() == "precious"
    assert not (out / ".state" / "videos" / f"{vid}.json").is_symlink()


def test_a_link_planted_at_the_dedup_work_folder_is_removed_and_the_folder_it_points_to_is_left_intact(tmp_path):
    """The review's scratch folder ``.state/dedup`` is deleted before and after dedup: resolved, a link
    there pointing at ``clips/`` deleted every clip of the folder."""
    out, a_vid, a_clips, b_clip = _clipped_twice(tmp_path)
    clips = sorted(p.name for p in (out / "clips").iterdir())
    (out / ".state" / "dedup").symlink_to("../clips")
    summary = vfm_curator.curate(tmp_path / "in", out, {**SERIAL, "dedup": {"enabled": True}})
    assert summary.failures == 0
    assert sorted(p.name for p in (out / "clips").iterdir()) == clips
    assert not (out / ".state" / "dedup").exists()


def test_links_planted_at_the_folders_tables_and_reports_are_replaced_and_their_targets_left_intact(tmp_path):
    """clips.parquet, failures.jsonl, summary.json, report.html and review.jsonl linked to files in
    the folder: resolved, each end of a run wrote its file over the linked one."""
    out, *_ = _clipped_twice(tmp_path)
    names = ["clips.parquet", "failures.jsonl", "summary.json", "report.html", "review.jsonl"]
    victims = []
    for name in names:
        (out / name).unlink()
        # relative: the folder moved elsewhere still points inside
        victims.append(plant_link(out / name, out / "kept", relative=True))
    summary = vfm_curator.curate(tmp_path / "in", out, {**SERIAL, "dedup": {"enabled": True}})
    assert (summary.skipped, summary.clips) == (2, 3)
    assert [v.read_text() for v in victims] == ["precious"] * len(names)
    assert not any((out / name).is_symlink() for name in names)
    assert pq.read_table(out / "clips.parquet").num_rows == 3


SHARD_OPTIONS = {"tokenizer": "pixel", "text_encoder": "hash", "resolutions": [[32, 48]], "frames": [9]}


def test_links_planted_at_a_shard_folders_outputs_are_replaced_and_their_targets_left_intact(tmp_path):
    make_video(tmp_path / "in" / "v.mp4", [12, 12], width=48, height=32, seed=3)
    (tmp_path / "in" / "v.txt").write_text("two short shots")
    clips = tmp_path / "clips"
    vfm_curator.curate(tmp_path / "in", clips, {**SERIAL, "options": {"split": {"min_clip_s": 0.4}, "stitch": {"threshold": 1.0}}})
    out = tmp_path / "shards"
    names = ["blend.yaml", "buckets.json", "failures.jsonl", "summary.json", ".state/bucketing.json"]
    victims = [plant_link(out / name, out / "kept", relative=True) for name in names]  # relative: pointing inside
    (out / "shard_config.json").symlink_to("kept/shard_config.json")  # dangling: the identity is written at its name
    summary = vfm_curator.shard(clips, out, SERIAL, **SHARD_OPTIONS)
    assert summary.samples >= 2 and summary.failures == 0
    assert [v.read_text() for v in victims] == ["precious"] * len(names)
    assert not (out / "kept" / "shard_config.json").exists()
    assert not any((out / name).is_symlink() for name in [*names, "shard_config.json"])


def test_clearing_a_shard_failure_removes_a_link_at_its_name_not_the_file_it_points_to(tmp_path):
    out = tmp_path / "shards"
    victim = plant_link(out / ".state" / "failed" / "c1.json", out / "32x48x9", relative=True)
    shard_state.clear_failure(out, "c1")
    assert victim.read_text() == "precious" and not os.path.lexists(out / ".state" / "failed" / "c1.json")


def test_an_output_files_folder_is_still_kept_inside_the_output_folder_and_its_name_must_be_a_file(tmp_path):
    out = tmp_path / "out"
    (out / "clips").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (out / "thumbs").symlink_to(tmp_path / "elsewhere")  # a folder link out of the folder is refused, as before
    for parts in [("thumbs", "x.jpg"), ("/etc", "passwd"), ("clips/../../x.mp4",), ("clips", ".."), (".",)]:
        with pytest.raises(ValueError, match="output folder"):
            output_path(out, *parts)
    assert output_path(out, "clips", "x.mp4") == out.resolve() / "clips" / "x.mp4"


def test_a_staged_clip_that_is_gone_is_not_taken_for_the_clip_at_its_final_name(tmp_path):
    """A kept clip whose staging file is gone is a machine failure (done again), also when the final
    name holds a clip of the staged size: a link there to another clip of that size is no such clip."""
    out = tmp_path / "out"
    plant_link(out / "clips" / "a.mp4", out / "other", text="x" * 10)
    with pytest.raises(OSError, match="staging file of a.mp4 is gone"):
        staging.staged_file(out / "clips" / ".gone.mp4.tmp", out / "clips" / "a.mp4")


def test_a_staged_clip_swapped_for_a_link_is_not_renamed_to_its_final_name(tmp_path):
    out = tmp_path / "out"
    folder = out / "clips"
    victim = plant_link(folder / ".v.c.a1.p1.x.mp4.tmp", tmp_path / "home")
    commits.commit(out, "v", [(folder / ".v.c.a1.p1.x.mp4.tmp", folder / "c.mp4")], [], {"video_id": "v"})
    with pytest.raises(SwappedFileError):
        commits.finish(out, "v")
    assert not os.path.lexists(folder / "c.mp4") and victim.read_text() == "precious"
