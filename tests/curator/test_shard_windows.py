"""A clip gives one sample per window of its frame count (``windows``: 0 = every window it fills),
not only its first frames: the samples are the clip's consecutive windows, keyed ``<id>``,
``<id>-w1``, ..., with their own spans; a resumed run neither loses nor repeats a window."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

import vfm_curator
from tests.curator.test_shard_pipeline import _samples
from vfm_curator.io.metadata import table
from vfm_curator.pipelines.clip_table import read_clip_table
from vfm_curator.pipelines.shard_files import BucketWriters
from vfm_curator.stages.shard_decode import load_frames
from vfm_curator.stages.shard_task import ShardTask
from vfm_curator.stages.shard_tokenize import to_frames
from vfm_curator.synth import make_video

SIZE, FRAMES = (32, 48), 9  # one 40-frame shot: 4 windows of 9 frames (4 left over)


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("windows")
    make_video(root / "in" / "a.mp4", [40], width=SIZE[1], height=SIZE[0], seed=3)
    (root / "in" / "a.txt").write_text("a drifting colour pattern")
    vfm_curator.curate(root / "in", root / "clips", {"run": {"runner": "serial"}})
    return root / "clips"


def _shard(clips: Path, out: Path, **options):
    return vfm_curator.shard(clips, out, {"run": {"runner": "serial"}}, tokenizer="pixel", text_encoder="hash",
                             resolutions=[list(SIZE)], frames=[FRAMES], **options)


def test_every_window_the_clip_fills_is_a_sample_of_its_consecutive_frames(clip, tmp_path):
    summary = _shard(clip, tmp_path / "all")
    (row,) = pq.read_table(clip / "clips.parquet").to_pylist()
    samples = _samples(tmp_path / "all")
    assert sorted(samples) == sorted([row["id"], *(f"{row['id']}-w{k}" for k in (1, 2, 3))])
    assert (summary.written, summary.samples_written, summary.samples) == (1, 4, 4)
    decoded = load_frames(str(clip / row["path"]), *SIZE, 4 * FRAMES)
    spans = []
    for k in range(4):
        sample = samples[row["id"] if k == 0 else f"{row['id']}-w{k}"]
        frames = to_frames(torch.as_tensor(np.asarray(sample["latent"]))[None])[0]  # pixel tokenizer: the frames
        np.testing.assert_array_equal(frames, decoded[k * FRAMES : (k + 1) * FRAMES])
        assert sample["meta"]["extra"]["window"] == k and sample["meta"]["extra"]["clip"] == row["id"]
        spans.append(sample["meta"]["span"])
    fps = row["fps"]
    for k, (start, end) in enumerate(spans):  # each window's own seconds, one after the other
        assert start == pytest.approx(row["start_s"] + k * FRAMES / fps) and end == pytest.approx(start + FRAMES / fps)


def test_windows_1_keeps_only_the_first_frames_and_2_the_first_two(clip, tmp_path):
    (row,) = pq.read_table(clip / "clips.parquet").to_pylist()
    _shard(clip, tmp_path / "one", windows=1)
    one = _samples(tmp_path / "one")
    assert sorted(one) == [row["id"]] and "window" not in one[row["id"]]["meta"]["extra"]
    _shard(clip, tmp_path / "two", windows=2)
    assert sorted(_samples(tmp_path / "two")) == sorted([row["id"], f"{row['id']}-w1"])


def test_a_rerun_skips_the_clip_and_writes_no_window_twice(clip, tmp_path):
    _shard(clip, tmp_path / "s")
    again = _shard(clip, tmp_path / "s")
    assert (again.skipped, again.written, again.samples) == (1, 0, 4)
    assert len(_samples(tmp_path / "s")) == 4


def test_a_clip_cut_short_writes_only_its_missing_windows_and_its_id_last(tmp_path):
    # An interruption after some windows reached a finished shard: the clip runs again (its id, the
    # first window, is written last, so it was not there) and only the other windows are added.
    task = ShardTask(id="c0", path="c0.mp4", fps=8.0, span=(1.0, 5.5), bucket="2x2x2", window=2)
    task.latent, task.text = np.zeros((3, 3, 2, 2, 2), np.float32), np.zeros((1, 4), np.float32)
    for k in range(3):
        task.latent[k] += k
    writers = BucketWriters(tmp_path, max_shard_bytes=1 << 20, tokenizer="pixel", text_encoder="hash")
    assert writers.write(task, done={"c0-w2"}) == 2
    writers.close()
    samples = _samples(tmp_path)
    assert sorted(samples) == ["c0", "c0-w1"]
    assert float(np.asarray(samples["c0-w1"]["latent"]).mean()) == 1.0 and samples["c0-w1"]["meta"]["span"] == [1.25, 1.5]
    with tarfile.open(next(tmp_path.glob("2x2x2/*.tar"))) as tar:
        order = [m.name.split(".")[0] for m in tar.getmembers()]
    assert order[-1] == "c0"


def test_a_clip_table_whose_id_is_another_clips_window_key_is_refused(clip, tmp_path):
    rows = pq.read_table(clip / "clips.parquet").to_pylist()
    rows = [{**r, "scores": dict(r["scores"])} for r in rows]
    rows.append({**rows[0], "id": f"{rows[0]['id']}-w1"})
    folder = tmp_path / "clips"
    folder.mkdir()
    (folder / rows[0]["path"]).parent.mkdir(parents=True, exist_ok=True)
    (folder / rows[0]["path"]).write_bytes((clip / rows[0]["path"]).read_bytes())
    pq.write_table(table(rows), folder / "clips.parquet")
    with pytest.raises(ValueError, match=r"is the key of the second or later window of clip"):
        read_clip_table(folder)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "all"])
def test_windows_must_be_a_whole_number_from_0(clip, tmp_path, bad):
    with pytest.raises(ValueError, match="windows must be a whole number >= 0"):
        _shard(clip, tmp_path / "bad", windows=bad)


def test_a_single_window_span_is_its_own_seconds_not_the_whole_clips(clip, tmp_path):
    # windows = 1 keeps the clip's first 9 of its 40 frames: the sample's span is those 9 frames'
    # seconds (docs/sharding.md: "each sample's span is its own seconds in the source")
    (row,) = pq.read_table(clip / "clips.parquet").to_pylist()
    _shard(clip, tmp_path / "one", windows=1)
    start, end = _samples(tmp_path / "one")[row["id"]]["meta"]["span"]
    assert start == pytest.approx(row["start_s"]) and end == pytest.approx(row["start_s"] + FRAMES / row["fps"])


def test_a_window_span_with_a_stride_ends_within_the_clip(tmp_path):
    # 2 windows of 9 frames at stride 2 are source frames 0, 2, ..., 34 of a 35-frame clip: the
    # second window's span stops at the clip's end, not one frame past it
    task = ShardTask(id="c1", path="c1.mp4", fps=8.0, span=(1.0, 1.0 + 35 / 8), bucket="2x2x9", window=9, stride=2)
    task.latent, task.text = np.zeros((2, 3, 3, 2, 2), np.float32), np.zeros((1, 4), np.float32)
    writers = BucketWriters(tmp_path, max_shard_bytes=1 << 20, tokenizer="pixel", text_encoder="hash")
    writers.write(task)
    writers.close()
    samples = _samples(tmp_path)
    assert samples["c1"]["meta"]["span"] == [1.0, 1.0 + 18 / 8]
    assert samples["c1-w1"]["meta"]["span"] == [1.0 + 18 / 8, 1.0 + 35 / 8]


def _killed_run_left(out: Path, row: dict, *, windows: int, frames: int, stride: int = 1, done: set[str]) -> None:
    """Write what a run killed partway through the clip left in finished shards: its first
    ``windows`` windows of ``frames`` frames (every ``stride``-th), but for the keys in ``done``."""
    killed = ShardTask(id=row["id"], path=row["path"], fps=row["fps"], span=(row["start_s"], row["end_s"]),
                       bucket=f"{SIZE[0]}x{SIZE[1]}x{frames}", window=frames, stride=stride)
    killed.latent, killed.text = np.zeros((windows, 3, frames, *SIZE), np.float32), np.zeros((1, 4), np.float32)
    writers = BucketWriters(out, max_shard_bytes=1 << 30, tokenizer="pixel", text_encoder="hash")
    writers.write(killed, done=done)
    writers.close()


def test_a_window_left_in_another_bucket_by_a_killed_run_is_still_written_in_the_clips_new_bucket(clip, tmp_path):
    # A run with frames = [17] was killed after window 1 of the clip (frames 17-33) reached a finished
    # shard of 32x48x17; the clip's id, written last, did not. The resumed run with frames = [9] puts
    # the clip in 32x48x9, where window 1 is frames 9-17: it must be written there, not taken as done.
    (row,) = pq.read_table(clip / "clips.parquet").to_pylist()
    out = tmp_path / "s"
    _killed_run_left(out, row, windows=2, frames=17, done={row["id"]})
    summary = _shard(clip, out)
    assert summary.samples_written == 4
    in_new_bucket = {}
    for shard in (out / f"{SIZE[0]}x{SIZE[1]}x{FRAMES}").glob("*.tar"):
        in_new_bucket.update(_samples_of(shard))
    assert sorted(in_new_bucket) == sorted([row["id"], *(f"{row['id']}-w{k}" for k in (1, 2, 3))])
    decoded = load_frames(str(clip / row["path"]), *SIZE, 2 * FRAMES)
    frames = to_frames(torch.as_tensor(np.asarray(in_new_bucket[f"{row['id']}-w1"]))[None])[0]
    np.testing.assert_array_equal(frames, decoded[FRAMES : 2 * FRAMES])


def _samples_of(shard: Path) -> dict[str, np.ndarray]:
    """key -> latent of one shard."""
    import io

    with tarfile.open(shard) as tar:
        return {m.name.split(".")[0]: np.load(io.BytesIO(tar.extractfile(m).read()))
                for m in tar.getmembers() if m.name.endswith(".latent.npy")}


def test_a_tokenizer_batch_of_clips_with_different_window_counts_gives_each_clip_its_own_windows():
    # shard_tokenize concatenates the windows of a call's clips (3, 1, 5, 2 windows, two buckets) and
    # encodes them batch_size at a time across clip boundaries: each clip must get back exactly its
    # own windows, in order (the pixel tokenizer's latent is the frames themselves)
    from vfm_curator.stages.shard_tokenize import ShardTokenizeStage

    rng = np.random.default_rng(0)
    tasks = []
    for i, (n, hw) in enumerate([(3, (4, 6)), (1, (4, 6)), (5, (4, 6)), (2, (6, 4))]):
        task = ShardTask(id=f"c{i}", path=f"c{i}.mp4", bucket=f"{hw[0]}x{hw[1]}x3", window=3)
        task.frames = rng.integers(0, 256, (n * 3, *hw, 3), dtype=np.uint8)
        tasks.append(task)
    given = {t.id: t.frames.copy() for t in tasks}
    ShardTokenizeStage(tokenizer="pixel").process(tasks)
    for task in tasks:
        frames = to_frames(torch.as_tensor(task.latents()))  # (N, T, H, W, 3)
        np.testing.assert_array_equal(frames.reshape(-1, *frames.shape[2:]), given[task.id])


def test_raising_windows_on_a_resumed_run_adds_the_missing_windows_of_clips_sharded_before(clip, tmp_path):
    (row,) = pq.read_table(clip / "clips.parquet").to_pylist()
    out = tmp_path / "s"
    _shard(clip, out, windows=1)
    raised = _shard(clip, out, windows=0)
    samples = _samples(out)
    assert sorted(samples) == sorted([row["id"], *(f"{row['id']}-w{k}" for k in (1, 2, 3))])
    assert (raised.topped_up, raised.samples_written, raised.skipped, raised.samples) == (1, 3, 0, 4)
    assert not any("windows" in n for n in raised.notices)
    decoded = load_frames(str(clip / row["path"]), *SIZE, 4 * FRAMES)
    for k in (1, 2, 3):  # the added windows are the clip's next frames, in the bucket that holds the clip
        frames = to_frames(torch.as_tensor(np.asarray(samples[f"{row['id']}-w{k}"]["latent"]))[None])[0]
        np.testing.assert_array_equal(frames, decoded[k * FRAMES : (k + 1) * FRAMES])
    again = _shard(clip, out, windows=0)
    assert (again.topped_up, again.samples_written, again.skipped, again.samples) == (0, 0, 1, 4)


def test_raising_windows_with_another_frame_count_on_a_resume_is_refused_naming_both(clip, tmp_path):
    out = tmp_path / "s"
    _shard(clip, out, windows=1)
    with pytest.raises(ValueError, match=r"windows 1 -> 0 together with frames \[9\] -> \[17\].*keep frames = \[9\]"):
        vfm_curator.shard(clip, out, {"run": {"runner": "serial"}}, tokenizer="pixel", text_encoder="hash",
                          resolutions=[list(SIZE)], frames=[17], windows=0)
    assert len(_samples(out)) == 1


def test_windows_left_by_a_killed_run_with_another_stride_fail_the_clip_instead_of_leaving_frames_out(clip, tmp_path):
    # A run at frame_stride 2 was killed after window 1 (source frames 18-34) reached a finished shard
    # of 32x48x9. Resumed at stride 1, window 1 is frames 9-17 under the same key and bucket: taking the
    # old one as done would leave frames 9-17 in no sample, so the clip fails naming the stride.
    (row,) = pq.read_table(clip / "clips.parquet").to_pylist()
    out = tmp_path / "s"
    _killed_run_left(out, row, windows=2, frames=FRAMES, stride=2, done={row["id"]})
    with pytest.raises(vfm_curator.NothingWrittenError):
        _shard(clip, out)
    (failure,) = [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines()]
    assert failure["kind"] == "stale-windows" and f"{row['id']}-w1" in failure["reason"] and "frame_stride" in failure["reason"]
    assert sorted(_samples(out)) == [f"{row['id']}-w1"]
    resumed = _shard(clip, out, frame_stride=2)  # the killed run's stride: the clip is finished
    assert resumed.samples_written == 1 and sorted(_samples(out)) == sorted([row["id"], f"{row['id']}-w1"])


def test_a_killed_runs_windows_with_the_same_stride_are_kept_and_the_clip_finished(clip, tmp_path):
    (row,) = pq.read_table(clip / "clips.parquet").to_pylist()
    out = tmp_path / "s"
    _killed_run_left(out, row, windows=4, frames=FRAMES, done={row["id"], f"{row['id']}-w1"})
    resumed = _shard(clip, out)
    assert resumed.samples_written == 2 and len(_samples(out)) == 4


def test_a_tokenizer_returning_fewer_latents_than_windows_fails_those_clips_instead_of_giving_them_others_windows():
    # a plugin tokenizer that encodes only the first video of a batch: the batched windows of three
    # clips came back short and were handed out by position (clip 0 got window 0 of clip 2, clips 1
    # and 2 no latent at all, "written" with no sample); each clip is now encoded alone, and one whose
    # windows still come back short fails with the shapes
    from vfm_curator.stages.shard_tokenize import ShardTokenizeStage

    class FirstVideoOnly(torch.nn.Module):
        def encode(self, video):
            return video[:1]

    stage = ShardTokenizeStage(tokenizer="pixel")
    stage.ensure_setup()
    stage.tokenizer = FirstVideoOnly()
    rng = np.random.default_rng(1)
    tasks = []
    for i, n in enumerate([2, 1, 3]):
        task = ShardTask(id=f"c{i}", path=f"c{i}.mp4", bucket="4x6x3", window=3)
        task.frames = rng.integers(0, 256, (n * 3, 4, 6, 3), dtype=np.uint8)
        tasks.append(task)
    one_window = tasks[1].frames.copy()
    stage.process(tasks)
    assert [t.failure is None for t in tasks] == [False, True, False]
    assert "returned latents of shape (1, 3, 3, 4, 6) for 2 window(s)" in tasks[0].failure["reason"]
    np.testing.assert_array_equal(to_frames(torch.as_tensor(tasks[1].latents()))[0], one_window)


def test_a_text_encoder_returning_fewer_rows_than_captions_fails_those_clips_instead_of_shifting_captions():
    # captions of a batch are handed back by position: an encoder that drops a row (here: the
    # batch's first caption only) gave the second clip nothing and could give a clip another's
    # caption; the batch is encoded clip by clip and each clip gets its own caption's embedding
    from vfm_curator.stages.shard_text import ShardTextStage

    stage = ShardTextStage(text_encoder="hash")
    stage.ensure_setup()
    real = stage.encoder

    class FirstCaptionOnly:
        def encode(self, captions):
            text, mask = real.encode(captions)
            return text[:1], mask[:1]

    stage.encoder = FirstCaptionOnly()
    tasks = [ShardTask(id=f"c{i}", path=f"c{i}.mp4", caption=c) for i, c in enumerate(["a red car", "two dogs on a beach"])]
    stage.process(tasks)
    for task in tasks:
        text, mask = real.encode([task.caption])
        assert task.failure is None
        np.testing.assert_array_equal(task.text, text[0][: int(mask[0].sum())].float().numpy())


def _cap_at(monkeypatch, frames: int) -> None:
    """windows = 0 keeps at most ``frames`` frames of a clip at the bucket's size (the real cap is
    512 MiB: a clip that long is too slow to make in a test)."""
    from vfm_curator.stages import shard_decode

    monkeypatch.setattr(shard_decode, "ALL_WINDOWS_BYTES", frames * SIZE[0] * SIZE[1] * 3)


def test_a_clip_cut_short_by_the_all_windows_frame_cap_is_counted_and_warned_about(clip, tmp_path, monkeypatch):
    # the 40-frame clip fills 4 windows of 9; a cap of 35 frames keeps 3 of them
    _cap_at(monkeypatch, 3 * FRAMES + 8)
    summary = _shard(clip, tmp_path / "s")
    (row,) = pq.read_table(clip / "clips.parquet").to_pylist()
    assert sorted(_samples(tmp_path / "s")) == sorted([row["id"], f"{row['id']}-w1", f"{row['id']}-w2"])
    assert (summary.written, summary.samples_written, summary.cut_short) == (1, 3, 1)
    assert json.loads((tmp_path / "s" / "summary.json").read_text())["cut_short"] == 1
    (notice,) = [n for n in summary.notices if "windows = 0" in n]
    assert notice.startswith("1 of the 1 clips written now filled more windows than they got") and "--windows N" in notice


@pytest.mark.parametrize("cap", [4 * FRAMES, 4 * FRAMES + 3, 100])
def test_a_clip_whose_windows_all_fit_under_the_frame_cap_is_not_counted_as_cut_short(clip, tmp_path, monkeypatch, cap):
    # 4 whole windows are all the clip fills (its last 4 frames make none): a cap holding them cuts nothing
    _cap_at(monkeypatch, cap)
    summary = _shard(clip, tmp_path / "s")
    assert (summary.samples_written, summary.cut_short) == (4, 0)
    assert not any("windows = 0" in n for n in summary.notices)


def test_an_explicit_windows_count_is_not_held_to_the_frame_cap(clip, tmp_path, monkeypatch):
    # the notice's advice: --windows N takes N windows however many frames that is
    _cap_at(monkeypatch, FRAMES)
    summary = _shard(clip, tmp_path / "s", windows=4)
    assert (summary.samples_written, summary.cut_short) == (4, 0)


def test_a_top_up_cut_short_by_the_frame_cap_is_counted(clip, tmp_path, monkeypatch):
    out = tmp_path / "s"
    _shard(clip, out, windows=1)
    _cap_at(monkeypatch, 2 * FRAMES)
    raised = _shard(clip, out, windows=0)
    assert (raised.topped_up, raised.samples_written, raised.cut_short, raised.samples) == (1, 1, 1, 2)
    assert any(n.startswith("1 of the 1 clips written now filled more windows") for n in raised.notices)


def test_raising_windows_does_not_top_up_a_clip_sharded_under_an_earlier_frame_stride(clip, tmp_path):
    # Run 1 (stride 1) wrote window 0 = frames 0-8; run 2 changed only the stride (the clip kept its
    # sample); run 3 raises windows at stride 2, where window 1 is frames 18-34: adding it next to the
    # old window 0 would leave frames 9-17 in no sample, so the clip keeps what it has.
    (row,) = pq.read_table(clip / "clips.parquet").to_pylist()
    out = tmp_path / "s"
    _shard(clip, out, windows=1)
    _shard(clip, out, windows=1, frame_stride=2)
    raised = _shard(clip, out, windows=0, frame_stride=2)
    assert sorted(_samples(out)) == [row["id"]]
    assert (raised.topped_up, raised.samples_written, raised.skipped) == (0, 0, 1)
