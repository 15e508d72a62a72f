"""Semantic dedup: near-duplicate clips by embedding, k-means buckets then chunked pairs, the kept
clip chosen by rank, and the whole-folder pass of a real curate run (H264 via PyAV) that takes a
duplicated video's clips out of clips.parquet and lists them in report.html."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from vfm_curator.dedup import find_duplicates
from vfm_curator.config import dedup_options
from vfm_curator.synth import make_video
from vfm_curator.tasks import clip_id


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def brute_force(emb, rank, threshold):
    """The reference: every pair at once, clips visited best first, each removed by the most similar
    earlier kept clip at >= threshold."""
    emb = unit(np.asarray(emb, np.float64))
    sims = emb @ emb.T
    order = np.lexsort((np.arange(len(emb)), rank))
    kept, kept_by = [], np.full(len(emb), -1)
    for i in order:
        if kept and sims[i, kept].max() >= threshold:
            kept_by[i] = kept[int(np.argmax(sims[i, kept]))]
        else:
            kept.append(i)
    return kept_by


def clustered(rng, centres=40, dim=16, noise=0.01):
    """Well separated centres, each with 0-3 near copies (cosine > 0.99 to it)."""
    base = unit(rng.normal(size=(centres, dim)))
    rows, copies = list(base), []
    for c in range(centres):
        for _ in range(int(rng.integers(0, 4))):
            copies.append(len(rows))
            rows.append(unit(base[c] + noise * rng.normal(size=dim)))
    return np.array(rows, np.float32), copies


def test_exact_and_near_duplicates_are_removed_and_distinct_ones_kept():
    rng = np.random.default_rng(0)
    distinct = unit(rng.normal(size=(5, 32)))
    emb = np.vstack([distinct, distinct[0], unit(distinct[1] + 0.02 * rng.normal(size=32))]).astype(np.float32)
    found = find_duplicates(emb, np.zeros(len(emb)), threshold=0.95)
    assert found.removed.tolist() == [5, 6]
    assert found.kept_by.tolist() == [-1, -1, -1, -1, -1, 0, 1]
    assert found.similarity[5] == pytest.approx(1.0, abs=1e-6) and 0.95 <= found.similarity[6] < 1.0
    # rank decides which copy stays: prefer the copies and the originals go
    found = find_duplicates(emb, np.array([1, 1, 0, 0, 0, 0, 0]), threshold=0.95)
    assert found.removed.tolist() == [0, 1] and found.kept_by[[0, 1]].tolist() == [5, 6]


def test_result_is_independent_of_the_bucket_count_for_clear_cases():
    emb, copies = clustered(np.random.default_rng(1))
    results = {k: find_duplicates(emb, np.zeros(len(emb)), threshold=0.95, buckets=k, seed=3) for k in (1, 2, 4, 8, 16)}
    for k, found in results.items():
        assert found.removed.tolist() == copies, k
        assert len(np.unique(found.bucket)) == k
    assert found.kept_by[copies].max() < 40  # every copy names its centre, which is kept


def test_chunked_buckets_match_the_brute_force_pairwise_on_random_embeddings(tmp_path):
    rng = np.random.default_rng(2)
    emb = rng.normal(size=(300, 6)).astype(np.float32)  # low dimension: many pairs above 0.9, and chains
    rank = rng.integers(0, 50, size=300)  # many ties, broken by index
    expected = brute_force(emb, rank, 0.9)
    assert 30 < (expected >= 0).sum() < 270
    memmap = np.lib.format.open_memmap(tmp_path / "e.npy", mode="w+", dtype=np.float32, shape=emb.shape)
    memmap[:] = emb
    for chunk in (1, 7, 64, 1000):
        found = find_duplicates(memmap, rank, threshold=0.9, buckets=1, chunk=chunk)
        np.testing.assert_array_equal(found.kept_by, expected, err_msg=f"chunk {chunk}")
    # several buckets: every removal is still a true near-duplicate of a kept clip
    found = find_duplicates(emb, rank, threshold=0.9, buckets=4, chunk=16)
    removed = found.removed
    assert len(removed) and (found.kept_by[found.kept_by[removed]] == -1).all()
    sims = (unit(emb[removed]) * unit(emb[found.kept_by[removed]])).sum(axis=1)
    np.testing.assert_allclose(sims, found.similarity[removed], atol=1e-5)
    assert (sims >= 0.9 - 1e-6).all()


def test_dedup_options_are_checked_with_what_is_accepted():
    assert dedup_options({})["enabled"] is False
    with pytest.raises(ValueError, match=r"threshold = 1.5; accepted: a cosine similarity in \(0, 1\]"):
        dedup_options({"threshold": 1.5})
    with pytest.raises(ValueError, match="unknown key.*treshold.*accepted: enabled"):
        dedup_options({"treshold": 0.9})
    with pytest.raises(ValueError, match="buckets = -1; accepted: an integer >= 0"):
        dedup_options({"buckets": -1})
    from vfm_curator.config import CurateConfig

    with pytest.raises(ValueError, match=r"\[dedup\] enabled = 'yes'"):
        CurateConfig.from_dict({"dedup": {"enabled": "yes"}}).check()


def test_curate_removes_a_duplicated_videos_clips_and_lists_them_in_the_report(tmp_path):
    from vfm_cli.main import app

    inp = tmp_path / "in"
    make_video(inp / "a.mp4", [30, 30], seed=1)
    shutil.copy(inp / "a.mp4", inp / "a_copy.mp4")  # the same H264 file again
    # one of the twins has a caption: its clips are kept. Give it to the twin whose clip id is the
    # higher for a span, so the tie-break by id alone would keep the other one there.
    twin = max(("a.mp4", "a_copy.mp4"), key=lambda name: clip_id(str((inp / name).resolve()), 0, 30))
    (inp / twin).with_suffix(".txt").write_text("a caption")
    make_video(inp / "c.mp4", [30, 30], seed=5)
    out = tmp_path / "out"
    config = tmp_path / "c.toml"
    config.write_text('[run]\nrunner = "serial"\n[options.split]\nmin_clip_s = 0.5\n')
    args = ["curate", str(inp), "-o", str(out), "--config", str(config), "--no-progress"]
    result = CliRunner().invoke(app, [*args, "--dedup", "--dedup-threshold", "0.99"])
    assert result.exit_code == 0, result.output
    assert re.search(r"near-duplicates removed\s+│\s+2", result.output)
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["clips"], summary["duplicates"]) == (4, 2)
    rows = pq.read_table(out / "clips.parquet").to_pylist()
    # hours out counts the clips in the table, not the removed twins
    assert summary["hours_out"] * 3600 == pytest.approx(sum(r["end_s"] - r["start_s"] for r in rows))
    by_id = {r["id"]: r for r in rows}
    review = [json.loads(line) for line in (out / "review.jsonl").read_text().splitlines()]
    assert [e["check"] for e in review] == ["dedup", "dedup"]
    for entry in review:
        kept = by_id[entry["kept_id"]]  # the kept twin is in the table, the removed clip is not
        assert entry["id"] not in by_id and {entry["source"], kept["source"]} == {str(inp / "a.mp4"), str(inp / "a_copy.mp4")}
        assert (entry["start_frame"], entry["end_frame"]) == (kept["start_frame"], kept["end_frame"])
        assert entry["similarity"] >= 0.99 and (out / entry["path"]).is_file()  # the file stays
    assert {by_id[e["kept_id"]]["caption"] for e in review} == {"a caption"}
    report = (out / "report.html").read_text()
    for entry in review:
        assert f'data-id="{entry["id"]}" data-kept="{entry["kept_id"]}"' in report
        assert f'<img src="thumbs/{entry["id"]}.jpg"' in report and f'<img src="thumbs/{entry["kept_id"]}.jpg"' in report
    assert report.count('data-status="removed"') == 2 and "2 near-duplicate clips removed" in report
    # thresholds are applied over the folder at every run: --no-dedup brings the clips back
    result = CliRunner().invoke(app, [*args, "--no-dedup"])
    assert result.exit_code == 0, result.output
    assert pq.read_table(out / "clips.parquet").num_rows == 6 and (out / "review.jsonl").read_text() == ""
    assert 'data-status="removed"' not in (out / "report.html").read_text()
