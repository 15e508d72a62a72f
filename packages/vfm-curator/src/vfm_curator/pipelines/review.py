"""The whole-folder pass at the end of a clipping run: caption QA thresholds and semantic dedup.

Both need every clip at once (a z-score needs the folder's scores; a duplicate can come from any
other video), so they run in :func:`vfm_curator.pipelines.clipping.finalize`, after ``clips.parquet``
is rebuilt as the union of every finished video and before the report. Clips they remove are taken
out of ``clips.parquet`` (what ``vfm shard`` reads); their files stay in ``clips/`` and
``thumbs/``, so a later run with other thresholds can bring them back. ``review.jsonl`` lists each
removed or flagged clip with why; ``summary.json`` counts them; ``report.html`` shows them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vfm_curator.config import dedup_options
from vfm_curator.io.paths import atomic_write, output_path, remove_folder
from vfm_curator.io.report_review import REVIEW_FILE
from vfm_curator.io.state import STATE

META_COLUMNS = ["id", "video_id", "source", "path", "start_frame", "end_frame", "start_s", "end_s", "width", "height",
                "caption", "scores"]


@dataclass
class Review:
    """What the pass did: entries are clip rows (no embedding) with ``check``, ``action`` and ``why``."""

    removed: list[dict[str, Any]] = field(default_factory=list)
    flagged: list[dict[str, Any]] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)  # which ran: caption_qa, dedup

    def count(self, check: str, action: str) -> int:
        return sum(e["check"] == check for e in (self.removed if action == "removed" else self.flagged))


def review_folder(out: Path, config: Any) -> Review:
    """Apply caption QA thresholds (when the pipeline has a ``caption_qa`` stage) and dedup (when
    ``[dedup] enabled``) to ``out/clips.parquet``; write ``review.jsonl``; return what was done.
    In memory: the ids, durations and caption scores of the table's clips, not their embeddings."""
    review = Review()
    table_path = output_path(out, "clips.parquet")  # rewritten without the removed rows (_drop_rows)
    qa = _qa_options(config)
    dedup = dedup_options(getattr(config, "dedup", None))
    if table_path.exists() and (qa is not None or dedup["enabled"]):
        gone: set[str] = set()
        if qa is not None:
            review.checks.append("caption_qa")
            for entry in caption_review(*_caption_scores(table_path), qa):
                (review.removed if entry["action"] == "removed" else review.flagged).append(entry)
            gone = {e["id"] for e in review.removed}
        if dedup["enabled"]:
            review.checks.append("dedup")
            review.removed += dedup_review(out, table_path, gone, dedup)
            gone = {e["id"] for e in review.removed}
            review.flagged = [e for e in review.flagged if e["id"] not in gone]  # flagged: kept clips only
        _describe(table_path, [*review.removed, *review.flagged])
        if gone:
            _drop_rows(table_path, gone)
    lines = [json.dumps(e, sort_keys=True) for e in [*review.removed, *review.flagged]]
    atomic_write(output_path(out, REVIEW_FILE), ("\n".join(lines) + "\n" if lines else "").encode("utf-8"))
    return review


def _qa_options(config: Any) -> dict[str, Any] | None:
    if config is None or "caption_qa" not in list(getattr(config, "stages", [])):
        return None
    from vfm_curator.stages.caption_qa import CaptionQAStage

    return {**CaptionQAStage.defaults, **config.stage_options("caption_qa")}


def _caption_scores(table_path: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    """ids, ``caption_clip`` and ``caption_vlm`` (NaN: none) of every row, read batch by batch."""
    import pyarrow.parquet as pq

    from vfm_curator.stages.caption_qa import CLIP_SCORE, VLM_SCORE

    ids, clip, vlm = [], [], []
    for batch in pq.ParquetFile(table_path).iter_batches(columns=["id", "scores"], batch_size=4096):
        ids += batch.column("id").to_pylist()
        for scores in batch.column("scores").to_pylist():
            scores = dict(scores or [])
            clip.append(scores.get(CLIP_SCORE, np.nan))
            vlm.append(scores.get(VLM_SCORE, np.nan))
    return ids, np.array(clip, dtype=np.float64), np.array(vlm, dtype=np.float64)


def zscores(values: np.ndarray) -> np.ndarray:
    """``(x - mean) / std`` over ``values`` (population std); all 0 when there is no spread."""
    values = np.asarray(values, dtype=np.float64)
    std = values.std() if len(values) else 0.0
    return (values - values.mean()) / std if std > 1e-12 else np.zeros_like(values)


def caption_review(ids: list[str], clip_scores: np.ndarray, vlm_scores: np.ndarray,
                   qa: dict[str, Any]) -> list[dict[str, Any]]:
    """Review entries of the clips whose caption scores fall under the thresholds (``action``
    removed for ``drop``, flagged for ``flag``), worst first. ``clip_scores`` / ``vlm_scores``:
    per clip, NaN where there is none (no caption): such a clip is not judged. The z-score is taken
    over the clips that have a ``caption_clip`` score."""
    clip_scores, vlm_scores = np.asarray(clip_scores, np.float64), np.asarray(vlm_scores, np.float64)
    scored = ~np.isnan(clip_scores)
    z = np.zeros(len(ids))
    z[scored] = zscores(clip_scores[scored])
    value = z if qa["calibration"] == "z" else clip_scores
    low_clip = scored & (value < qa["min_score"]) if qa["min_score"] is not None else np.zeros(len(ids), bool)
    low_vlm = ~np.isnan(vlm_scores) & (vlm_scores < qa["min_vlm"]) if qa["min_vlm"] is not None else np.zeros(len(ids), bool)
    entries = []
    for i in np.flatnonzero(low_clip | low_vlm):
        why = []
        if low_clip[i]:
            why.append(f"caption-frame similarity {'z-score ' if qa['calibration'] == 'z' else ''}{value[i]:.3f} under "
                       f"{qa['min_score']} (cosine {clip_scores[i]:.4f})")
        if low_vlm[i]:
            why.append(f"VLM P(yes) {vlm_scores[i]:.3f} under {qa['min_vlm']}")
        entries.append({"id": ids[i], "check": "caption_qa", "action": "removed" if qa["action"] == "drop" else "flagged",
                        "why": "; ".join(why), "z": round(float(z[i]), 4)})
    return sorted(entries, key=lambda e: (e["z"], e["id"]))


def dedup_review(out: Path, table_path: Path, gone: set[str], opts: dict[str, Any]) -> list[dict[str, Any]]:
    """Near-duplicate clips among the rows not already ``gone``, as review entries. The embeddings
    are streamed from the table into a memory map under ``.state/dedup`` (removed after)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from vfm_curator.dedup import find_duplicates

    work = output_path(out, STATE, "dedup")
    remove_folder(work)
    work.mkdir(parents=True)
    emb = None
    try:
        ids: list[str] = []
        durations: list[float] = []
        captioned: list[bool] = []
        source = pq.ParquetFile(table_path)
        for batch in source.iter_batches(columns=["id", "start_s", "end_s", "caption", "embedding"], batch_size=4096):
            spans = zip(batch.column("start_s").to_pylist(), batch.column("end_s").to_pylist())
            text = pc.utf8_trim_whitespace(batch.column("caption"))
            has_caption = pc.fill_null(pc.not_equal(text, ""), False).to_pylist()
            vectors = batch.column("embedding").to_numpy(zero_copy_only=False)
            for cid, (start, end), caption, vec in zip(batch.column("id").to_pylist(), spans, has_caption, vectors):
                if vec is None or cid in gone:
                    continue
                if emb is None:
                    emb = np.lib.format.open_memmap(work / "embeddings.npy", mode="w+", dtype=np.float32,
                                                    shape=(source.metadata.num_rows, len(vec)))
                if len(vec) != emb.shape[1]:
                    raise ValueError(f"clips.parquet holds embeddings of {emb.shape[1]} and {len(vec)} values: the embed "
                                     "stage's embedder changed between runs into this folder; dedup compares one embedder's "
                                     "embeddings (re-run the folder with one embedder, or set [dedup] enabled = false)")
                emb[len(ids)] = vec
                ids.append(cid)
                durations.append(float(end) - float(start))
                captioned.append(bool(caption))
        if not ids:
            return []
        # kept first: a captioned clip (shards need text), then the longest, then the lowest id
        order = sorted(range(len(ids)), key=lambda i: (not captioned[i], -durations[i], ids[i]))
        rank = np.empty(len(ids), dtype=np.int64)
        rank[order] = np.arange(len(ids))
        found = find_duplicates(emb[:len(ids)], rank, threshold=float(opts["threshold"]), buckets=opts["buckets"],
                                chunk=opts["chunk"], seed=opts["seed"])
        entries = [{"id": ids[i], "check": "dedup", "action": "removed", "kept_id": ids[found.kept_by[i]],
                    "similarity": round(float(found.similarity[i]), 6),
                    "why": f"near-duplicate of {ids[found.kept_by[i]]} (cosine {found.similarity[i]:.4f} >= {opts['threshold']})"}
                   for i in found.removed]
        return sorted(entries, key=lambda e: (e["kept_id"], e["id"]))
    finally:
        del emb
        remove_folder(work)


def _describe(table_path: Path, entries: list[dict[str, Any]]) -> None:
    """Add each entry's clip metadata (source, span, caption, scores; the kept clip's source) from
    the table, reading only those rows."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    wanted = {e["id"] for e in entries} | {e["kept_id"] for e in entries if "kept_id" in e}
    if not wanted:
        return
    rows: dict[str, dict[str, Any]] = {}
    value_set = pa.array(sorted(wanted), type=pa.string())
    for batch in pq.ParquetFile(table_path).iter_batches(columns=META_COLUMNS, batch_size=4096):
        hit = pa.Table.from_batches([batch]).filter(pc.is_in(batch.column("id"), value_set=value_set))
        rows.update((r["id"], r) for r in hit.to_pylist())
    for entry in entries:
        row = rows[entry["id"]]
        keep = ("video_id", "source", "path", "start_frame", "end_frame", "start_s", "end_s", "width", "height", "caption")
        entry.update({k: row.get(k) for k in keep}, scores=dict(row.get("scores") or []))
        if "kept_id" in entry:
            entry["kept_source"] = str(rows[entry["kept_id"]]["source"])


def _drop_rows(table_path: Path, ids: set[str]) -> None:
    """Rewrite the table without the rows of ``ids``, batch by batch."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from vfm_plugins.files import fresh_file

    source = pq.ParquetFile(table_path)
    drop = pa.array(sorted(ids), type=pa.string())
    # a new file (unpredictable, exclusively created name) renamed over the table: a link planted in
    # the folder is never written through; a killed run's leftover is a ``.*.tmp`` the next run sweeps
    with fresh_file(table_path) as tmp, pq.ParquetWriter(tmp, source.schema_arrow) as writer:
        for batch in source.iter_batches(batch_size=4096):
            writer.write_table(pa.Table.from_batches([batch]).filter(pc.invert(pc.is_in(batch.column("id"), value_set=drop))))


def apply_options(config: Any, *, caption_qa_model: str | None = None, caption_min_score: float | None = None,
                  caption_qa: str | None = None, caption_calibration: str | None = None, dedup: bool | None = None,
                  dedup_threshold: float | None = None) -> None:
    """Command-line overrides of a curate config (``vfm curate --caption-qa-model ... --dedup``). A
    caption option without a ``caption_qa`` stage in the pipeline adds one before ``write``, which
    then needs a model (``--caption-qa-model`` or ``[options.caption_qa]``)."""
    qa = {"embedder_options": None, "min_score": caption_min_score, "action": caption_qa, "calibration": caption_calibration}
    if caption_qa_model is not None or any(v is not None for v in qa.values()):
        if "caption_qa" not in config.stages:
            at = config.stages.index("write") if "write" in config.stages else len(config.stages)
            config.stages.insert(at, "caption_qa")
        options = config.options.setdefault("caption_qa", {})
        if caption_qa_model is not None:
            options["embedder_options"] = {**options.get("embedder_options", {}), "model_path": str(caption_qa_model)}
        for key in ("min_score", "action", "calibration"):
            if qa[key] is not None:
                options[key] = qa[key]
    if dedup is not None or dedup_threshold is not None:
        config.dedup = dict(config.dedup or {})
        config.dedup["enabled"] = True if dedup is None else bool(dedup)
        if dedup_threshold is not None:
            config.dedup["threshold"] = float(dedup_threshold)
