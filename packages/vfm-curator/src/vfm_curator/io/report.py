"""``report.html``: what a curator reads after a run, over the whole output folder.

Figures with units; every clip (kept or filtered, with why) in a table that sorts and filters in the
browser; histograms of clip length and of each score; time per stage; failures grouped by reason
with what to do. One self-contained file: inline CSS, script and SVG, relative links
(``thumbs/<id>.jpg``, ``clips/<id>.mp4``) so the folder can be moved. File names and captions are
data from outside: every one is escaped.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vfm_curator.config import DEFAULT_STAGES
from vfm_curator.io import report_charts as charts
from vfm_curator.io import report_review as review
from vfm_curator.io.paths import atomic_write, output_path, safe_join
from vfm_curator.io.report_assets import CSS, ERROR_HOOK, SCRIPT
from vfm_curator.io.report_review import href

e = html.escape

#: What to do about a failure, by its kind (see vfm_curator.failures); then by its cause.
ADVICE = {
    "unusable-input": "The file is not a readable video (damaged, empty, or not video at all). Re-encode or replace it; "
                      "a changed file is tried again on the next run.",
    "bad-name": "The file name cannot be encoded. Rename the file (UTF-8) and run again.",
    "no-clips": "No shot is as long as split.min_clip_s. Lower min_clip_s (or min_shot_s / threshold) if these "
                "videos should give clips; a changed config retries them.",
    "too-short": "The video is shorter than split.min_clip_s, or has fewer frames than decode.min_frames (as its reason "
                 "says). Lower that option if such short videos are wanted; a changed config retries them.",
    "too-large": "The video's frame size is over decode.max_pixels. Raise max_pixels if such footage is wanted; "
                 "a changed config retries it.",
    "all-filtered": "Every clip was filtered out. Check the filter limits against the scores in the clip table; "
                    "a changed config retries these videos.",
    "no-caption": "The video has no caption. Add one (manifest, <video>.txt / .json sidecar) or set a captioner.",
    "worker-crash": "A worker process died (killed or crashed). Retried automatically up to run.max_attempts; "
                    "else run again with --retry-failed machine.",
    "out-of-memory": "Ran out of memory. Give the stage more memory or fewer workers, then --retry-failed out-of-memory.",
    "timeout": "A stage took longer than its time limit. Raise the limit or check the machine, then --retry-failed timeout.",
    "stage-setup": "A stage could not start (a model path or an option it needs). Fix the config and run again.",
    "plugin-error": "A plugin's stage raised an error of its own (a bug of the plugin its reason names, not of the video). "
                    "Report it to the plugin's authors or leave the stage out; once it is mended, run again with "
                    "--retry-failed plugin-error.",
    "caption-endpoint": "The caption server did not answer, kept failing (5xx) or refused the request (4xx: URL, model, "
                        "key or an option). Unanswered requests are retried up to run.max_attempts; fix the server or "
                        "the [options.caption] captioner_options, then run again (--retry-failed caption-endpoint).",
}
#: What `vfm curate` and the report say when clips have no caption.
UNCAPTIONED_ADVICE = ("`vfm shard` fails clips without a caption unless told otherwise: shard them unconditional with "
                      "`vfm shard --no-require-captions`, or caption them: name a .jsonl/.csv manifest of path and caption among "
                      "the inputs, add <video>.txt sidecar captions or a captioner (--captioner endpoint --caption-url URL "
                      "--caption-model NAME) and run `vfm curate` again with --redo-changed")
CAUSE_ADVICE = {
    "input": "The input file caused it: fix or replace the file (a changed file is retried), or leave it out.",
    "config": "The configuration caused it: change the option named in the reason; a changed config retries it.",
    "machine": "The machine caused it (crash, memory, time): run again with --retry-failed machine.",
}


@dataclass
class ClipRow:
    """One line of the clip table."""

    id: str
    source: str
    start_s: float
    end_s: float
    start_frame: int
    end_frame: int
    width: int
    height: int
    caption: str | None
    scores: dict[str, float]
    why: str | None = None  # None: kept
    path: str | None = None  # relative clip file, when it exists
    thumb: str | None = None  # relative thumbnail, when it exists
    bytes: int = 0
    caption_by: dict[str, str] = field(default_factory=dict)  # captioner (manifest, sidecar, a name), model, prompt
    review: str | None = None  # "removed" (dedup, caption QA drop) or "flagged" (caption QA) at the end of the run
    flag: str | None = None  # why caption QA flagged it

    @property
    def duration(self) -> float:
        return self.end_s - self.start_s


@dataclass
class ReportData:
    clips: list[ClipRow] = field(default_factory=list)
    ok: list[dict] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)
    review: list[dict] = field(default_factory=list)  # review.jsonl: removed and flagged clips
    listed: list[dict] = field(default_factory=list)  # the failures shown: failed, and failed redos that kept clips


def write_report(out: Path, summary: Any, ok: list[dict], failed: list[dict], listed: list[dict] | None = None) -> Path:
    """Write ``out/report.html`` from the folder's records (``ok``, ``failed``), its ``clips.parquet``
    and the run's ``summary``; returns the path. ``listed``: the failures to show (default ``failed``;
    with the failed redos that kept a finished video's clips:
    :func:`vfm_curator.pipelines.summary.listed_failures`)."""
    out = Path(out)
    entries = review.read_review(out)
    data = ReportData(clips=collect_clips(out, ok, failed, entries), ok=ok, failed=failed, review=entries,
                      listed=failed if listed is None else listed)
    page = render(data, summary, title=out.name, out=out)
    path = output_path(out, "report.html")
    atomic_write(path, page.encode("utf-8"))
    return path


def collect_clips(out: Path, ok: list[dict], failed: list[dict], entries: list[dict] | None = None) -> list[ClipRow]:
    """Kept clips from ``clips.parquet``, filtered ones from the records (the write stage lists them),
    removed and flagged ones from the review ``entries`` (review.jsonl)."""
    names = {r.get("video_id"): str(r.get("source", "")) for r in [*ok, *failed]}
    rows: list[ClipRow] = []
    table = safe_join(out, "clips.parquet")
    if table.exists():
        import pyarrow.parquet as pq

        columns = ["id", "video_id", "source", "path", "start_frame", "end_frame", "start_s", "end_s", "width",
                   "height", "caption", "scores"]
        columns += [c for c in ("caption_by",) if c in pq.read_schema(table).names]  # a table from before it existed
        for r in pq.read_table(table, columns=columns).to_pylist():
            rows.append(ClipRow(
                id=str(r["id"]), source=names.get(r["video_id"], str(r["source"])), start_s=float(r["start_s"]),
                end_s=float(r["end_s"]), start_frame=int(r["start_frame"]), end_frame=int(r["end_frame"]),
                width=int(r["width"] or 0), height=int(r["height"] or 0), caption=r["caption"],
                scores=_scores(r["scores"]), path=str(r["path"]), caption_by=dict(r.get("caption_by") or []),
            ))
    for record in [*ok, *failed]:
        for c in record.get("filtered") or []:
            rows.append(ClipRow(
                id=str(c.get("id", "")), source=str(record.get("source", "")), start_s=float(c.get("start_s", 0.0)),
                end_s=float(c.get("end_s", 0.0)), start_frame=int(c.get("start_frame", 0)),
                end_frame=int(c.get("end_frame", 0)), width=int(c.get("width") or 0), height=int(c.get("height") or 0),
                caption=c.get("caption"), scores=_scores(c.get("scores")), why=str(c.get("rejected") or "filtered"),
                caption_by=dict(c.get("caption_by") or {}),
            ))
    flags = {str(x.get("id")): str(x.get("why", "")) for x in entries or [] if x.get("action") == "flagged"}
    for row in rows:
        if row.id in flags:
            row.review, row.why = "flagged", None
    for x in entries or []:
        if x.get("action") == "removed":
            rows.append(ClipRow(
                id=str(x.get("id", "")), source=names.get(x.get("video_id"), str(x.get("source", ""))),
                start_s=float(x.get("start_s") or 0.0), end_s=float(x.get("end_s") or 0.0),
                start_frame=int(x.get("start_frame") or 0), end_frame=int(x.get("end_frame") or 0),
                width=int(x.get("width") or 0), height=int(x.get("height") or 0), caption=x.get("caption"),
                scores=_scores(x.get("scores")), why=str(x.get("why") or "removed"), path=x.get("path"), review="removed",
            ))
    for row in rows:
        row.flag = flags.get(row.id)
        _attach_files(out, row)
    return rows


def _scores(value: Any) -> dict[str, float]:
    """A scores cell: a dict, or parquet's map as a list of (key, value) pairs."""
    if not value:
        return {}
    items = value.items() if isinstance(value, dict) else value
    return {str(k): float(v) for k, v in items if v is not None}


def _attach_files(out: Path, row: ClipRow) -> None:
    """Keep links only to files that exist inside the folder (a link that does not resolve is worse than none)."""
    try:
        if row.path:
            clip = safe_join(out, row.path)
            row.path, row.bytes = (row.path, clip.stat().st_size) if clip.is_file() else (None, 0)
        thumb = f"thumbs/{row.id}.jpg"
        row.thumb = thumb if safe_join(out, thumb).is_file() else None
    except (ValueError, OSError):  # a path from the table that leaves the folder: no link
        row.path, row.thumb = None, None


def render(data: ReportData, summary: Any, *, title: str, out: Path | None = None) -> str:
    score_names = sorted({name for c in data.clips for name in c.scores})
    body = "".join([
        f"<h1>vfm curate report <span class=\"muted\">{e(title)}</span></h1>",
        "<h2>Figures</h2>", figures(data, summary),
        "<h2>Clip length and scores</h2><div class=\"charts\">",
        charts.histogram([c.duration for c in data.clips], title="clip length", unit="s"),
        *[charts.histogram([c.scores[n] for c in data.clips if n in c.scores], title=f"score: {n}") for n in score_names],
        "</div>",
        "<h2>Time per stage</h2>", stage_chart(data, summary),
        f"<h2>Failures <span class=\"muted\">({len(data.listed)} videos)</span></h2>", failures(data.listed),
        review_sections(data, out),
        f"<h2>Clips <span class=\"muted\">({len(data.clips)})</span></h2>", clip_table(data.clips, score_names),
    ])
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>vfm curate report: {e(title)}</title>
<script>{ERROR_HOOK}</script>
<style>{CSS}</style></head><body>
{body}
<script>{SCRIPT}</script>
</body></html>
"""


def review_sections(data: ReportData, out: Path | None) -> str:
    """Caption QA (when captions were scored) and duplicates (when any was removed)."""
    if out is None:
        return ""
    scored = sum(1 for c in data.clips if review.CLIP_SCORE in c.scores or review.VLM_SCORE in c.scores)
    parts = []
    if scored or any(x.get("check") == "caption_qa" for x in data.review):
        parts.append(review.caption_section(out, data.review, scored))
    if any(x.get("check") == "dedup" for x in data.review):
        parts.append(review.dedup_section(out, data.review))
    return "".join(parts)


def figures(data: ReportData, summary: Any) -> str:
    kept = [c for c in data.clips if c.why is None]
    removed = sum(c.review == "removed" for c in data.clips)
    filtered = len(data.clips) - len(kept) - removed
    input_s = sum(float(r.get("duration_s") or 0.0) for r in data.ok)
    clip_s = sum(c.duration for c in kept)
    uncaptioned = sum(not (c.caption or "").strip() for c in kept)
    wall_s = float(getattr(summary, "wall_s", 0.0) or 0.0)
    processed_s = float(getattr(summary, "video_s_processed", 0.0) or 0.0)
    from vfm_curator.io.state import video_counts

    ok, failed, redone = video_counts(data.ok, data.failed)
    kept_after = f"; {redone} ok kept {'its' if redone == 1 else 'their'} clips after a failed redo" if redone else ""
    items = [
        ("videos", f"{ok + failed}", f"{ok} ok, {failed} failed{kept_after} (each source video once)"),
        ("input video", charts.duration(input_s), f"{input_s / 3600:.2f} h of videos that gave clips"),
        ("clips kept", f"{len(kept)}", f"{filtered} filtered out" + (f", {removed} removed at review" if removed else "")),
        ("captioned", f"{len(kept) - uncaptioned} of {len(kept)}", _caption_note(kept, uncaptioned)),
        ("clip video", charts.duration(clip_s), f"{clip_s / input_s:.0%} of the input" if input_s else ""),
        ("clip files", charts.size(sum(c.bytes for c in kept)), "H264 in clips/"),
        ("this run", f"{int(getattr(summary, 'processed', 0) or 0)} videos",
         f"{int(getattr(summary, 'skipped', 0) or 0)} skipped (finished before)"),
        ("wall time", charts.duration(wall_s), f"{processed_s / wall_s:.2f} s of video per s" if wall_s > 0 else ""),
    ]
    cells = "".join(f"<li><span>{e(label)}</span><b>{e(value)}</b><span class=\"muted\">{e(note)}</span></li>"
                    for label, value, note in items)
    advice = (f"<p class=\"advice\" id=\"uncaptioned\">{uncaptioned} kept clip{'s have' if uncaptioned != 1 else ' has'} "
              f"no caption. {e(UNCAPTIONED_ADVICE)}.</p>") if uncaptioned else ""
    return f"<ul class=\"figures\">{cells}</ul>{advice}{_rerun_note(summary)}{_left_out_note(summary)}{_short_note(data.ok)}"


def _rerun_note(summary: Any) -> str:
    """What a re-run skipped although it changed (options, files, captions), the inputs it took
    for copies of finished videos and the videos whose file changed while curated: the notices
    `vfm curate` prints, kept in the report."""
    lines = [getattr(summary, name)() for name in ("other_options_line", "changed_inputs_line", "copies_line",
                                                   "changed_while_curated_line")
             if callable(getattr(summary, name, None))]
    return "".join(f"<p class=\"advice\">{e(line)}.</p>" for line in lines if line)


def _left_out_note(summary: Any) -> str:
    """What the input folders held that this run did not read: folders it could not list (``not
    read: FOLDER: REASON``), files not named like videos, hidden ones; as `vfm curate` prints it."""
    lines = [f"not read: {line}" for line in (summary.not_read_lines() if hasattr(summary, "not_read_lines") else [])]
    if getattr(summary, "left_out", None):
        lines.append(f"left out: {summary.left_out}")
    return "".join(f"<p class=\"advice\">{e(line)}.</p>" for line in lines)


def _short_note(ok: list[dict]) -> str:
    """The finished videos that decoded well short of their declared length (the decode stage's
    ``decoded_short``), each with both lengths: truncated or damaged files whose clips stop early."""
    short = [(str(r.get("source", "")), r["meta"]["decoded_short"]) for r in ok if (r.get("meta") or {}).get("decoded_short")]
    if not short:
        return ""
    items = ", ".join(f"{e(Path(src).name)} ({charts.duration(s['decoded_s'])} of {charts.duration(s['declared_s'])})"
                      for src, s in sorted(short))
    return (f"<p class=\"advice\" id=\"decoded-short\">{len(short)} video{'s' if len(short) != 1 else ''} decoded short of "
            f"the length {'they declare' if len(short) != 1 else 'it declares'} (truncated or damaged files; their clips "
            f"end where decoding stopped): {items}.</p>")


def _caption_note(kept: list[ClipRow], uncaptioned: int) -> str:
    """Who made the captions (``by endpoint: model-x (12), sidecar (3)``) and how many have none."""
    makers: dict[str, int] = {}
    for c in kept:
        if (c.caption or "").strip():
            by = c.caption_by.get("captioner", "unknown")
            label = f"{by}: {c.caption_by['model']}" if c.caption_by.get("model") else by
            makers[label] = makers.get(label, 0) + 1
    note = ", ".join(f"{label} ({n})" for label, n in sorted(makers.items(), key=lambda kv: -kv[1]))
    return "; ".join(x for x in (f"by {note}" if note else "", f"{uncaptioned} without" if uncaptioned else "") if x)


def stage_chart(data: ReportData, summary: Any) -> str:
    """Mean seconds per video of each stage (from the records), with the workers the balancer gave it."""
    totals: dict[str, list[float]] = {}
    for record in [*data.ok, *data.failed]:
        for stage, seconds in (record.get("timings") or {}).items():
            totals.setdefault(str(stage), []).append(float(seconds))
    workers = dict(getattr(summary, "workers", {}) or {})
    decisions = list(getattr(summary, "decisions", []) or [])
    measured = decisions[-1].get("seconds_per_item", {}) if decisions else {}
    # a fused stage shares its group's workers (one worker runs the group's stages in turn): named
    # once as the group's, not as workers of its own (8 fused stages x 2 read as 16 workers)
    fused = {stage: group for group in (getattr(summary, "fused", None) or []) for stage in group}
    # a run that ran nothing has no workers, and the records keep their timings with sorted keys:
    # the default stages in pipeline order, then any other in the records' order
    rank = {stage: i for i, stage in enumerate(DEFAULT_STAGES)}
    order = list(workers) + sorted((s for s in totals if s not in workers), key=lambda s: rank.get(s, len(rank)))
    items = []
    for stage in order:
        if stage not in totals:
            continue
        note = []
        n = workers.get(stage)
        if n is not None and stage not in fused:  # a fused group's workers are named once, in the title
            note.append(f"{n} worker{'s' if n != 1 else ''}")
        if stage in measured and stage not in fused:  # a fused stage's own share is measured on few calls
            note.append(f"balancer measured {charts.number(float(measured[stage]))} s per call")
        items.append((stage, sum(totals[stage]) / len(totals[stage]), ", ".join(note)))
    videos = max((len(v) for v in totals.values()), default=0)
    groups = "".join(f"; {g[0]}..{g[-1]} fused ({len(g)} stages, {workers.get(g[0], '?')} worker{'s' if workers.get(g[0]) != 1 else ''})"
                     for g in (getattr(summary, "fused", None) or []))
    title = (f"seconds per video, mean over {videos} videos{groups}"
             + (f"; {len(decisions)} balancer decision{'s' if len(decisions) != 1 else ''}" if decisions else ""))
    return charts.bars(items, title=title, unit="s")


def failures(failed: list[dict]) -> str:
    if not failed:
        return "<p>None: every video gave clips.</p>"
    groups: dict[tuple[str, str], list[dict]] = {}
    for record in failed:
        failure = record.get("failure") or {}
        key = (str(failure.get("kind", "error")), str(failure.get("cause", "input")))
        groups.setdefault(key, []).append(record)
    rows = []
    for (kind, cause), records in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        stages = sorted({str((r.get("failure") or {}).get("stage", "")) for r in records})
        advice = ADVICE.get(kind, CAUSE_ADVICE.get(cause, "See the reasons."))
        items = "".join(
            f"<li><span title=\"{e(str(r.get('source', '')))}\">{e(_name(r.get('source', '')))}</span>: "
            f"<span class=\"why\">{e(str((r.get('failure') or {}).get('reason', '')))}</span></li>"
            for r in records[:50]
        )
        more = f"<li class=\"muted\">and {len(records) - 50} more (failures.jsonl)</li>" if len(records) > 50 else ""
        rows.append(
            f"<tr data-kind=\"{e(kind)}\"><td><b>{e(kind)}</b><br><span class=\"muted\">cause: {e(cause)}; stage: "
            f"{e(', '.join(stages))}</span></td><td class=\"num\">{len(records)}</td>"
            f"<td class=\"advice\">{e(advice)}</td><td><ul>{items}{more}</ul></td></tr>"
        )
    return ("<table class=\"failures\"><thead><tr><th>reason</th><th>videos</th><th>what to do</th><th>which</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def clip_table(clips: list[ClipRow], score_names: list[str]) -> str:
    if not clips:
        return "<p>No clips.</p>"
    heads = [("clip", "text"), ("source", "text"), ("span", "num"), ("duration s", "num"), ("resolution", "num"),
             ("caption", "text"), *[(f"score: {n}", "num") for n in score_names], ("status", "text")]
    head = "<th>thumbnail</th>" + "".join(
        f"<th data-type=\"{kind}\"><button type=\"button\">{e(label)}</button></th>" for label, kind in heads
    )
    rows = "".join(_clip_row(c, score_names) for c in clips)
    controls = (
        "<div class=\"controls\"><label>search <input id=\"clip-search\" type=\"search\" "
        "placeholder=\"source, caption, id, reason\"></label>"
        "<label>status <select id=\"clip-status\"><option value=\"all\">all</option><option value=\"kept\">kept</option>"
        "<option value=\"filtered\">filtered</option><option value=\"removed\">removed</option></select></label>"
        "<label>min duration (s) <input id=\"clip-min-duration\" type=\"number\" min=\"0\" step=\"0.5\" value=\"0\"></label>"
        "<span id=\"clip-shown\" class=\"muted\"></span></div>"
    )
    return f"{controls}<table id=\"clips\"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _clip_row(c: ClipRow, score_names: list[str]) -> str:
    status = "removed" if c.review == "removed" else "kept" if c.why is None else "filtered"
    img = f"<img src=\"{href(c.thumb)}\" alt=\"\" loading=\"lazy\">" if c.thumb else ""
    thumb = f"<a href=\"{href(c.path)}\">{img or 'clip'}</a>" if c.path else img
    label = f"<a href=\"{href(c.path)}\">{e(c.id)}</a>" if c.path else e(c.id)
    span = f"{c.start_s:.2f}–{c.end_s:.2f} s (frames {c.start_frame}–{c.end_frame})"
    scores = "".join(
        f"<td class=\"num\" data-v=\"{c.scores[n]!r}\">{e(charts.number(c.scores[n]))}</td>" if n in c.scores
        else "<td class=\"num\" data-v=\"\"></td>"
        for n in score_names
    )
    why = "kept" if c.why is None else f"{status}: {c.why}"
    if c.review == "flagged":
        why = f"kept, caption flagged: {c.flag}"
    text = " ".join([c.id, _name(c.source), c.caption or "", c.why or "", c.flag or ""]).lower()
    return (
        f"<tr class=\"{status}\" data-status=\"{status}\" data-duration=\"{c.duration!r}\" data-text=\"{e(text)}\">"
        f"<td class=\"thumb\">{thumb}</td>"
        f"<td data-v=\"{e(c.id)}\">{label}{f' <span class=muted>({charts.size(c.bytes)})</span>' if c.bytes else ''}</td>"
        f"<td data-v=\"{e(_name(c.source))}\" title=\"{e(c.source)}\">{e(_name(c.source))}</td>"
        f"<td class=\"num\" data-v=\"{c.start_s!r}\">{e(span)}</td>"
        f"<td class=\"num\" data-v=\"{c.duration!r}\">{c.duration:.2f}</td>"
        f"<td class=\"num\" data-v=\"{c.width * c.height}\">{f'{c.width}×{c.height}' if c.width else ''}</td>"
        f"<td class=\"caption\" data-v=\"{e(c.caption or '')}\">{e(c.caption) if c.caption else '<span class=muted>none</span>'}"
        f"{_caption_by(c) if c.caption else ''}</td>"
        f"{scores}"
        f"<td data-v=\"{e(why)}\" class=\"{'why' if c.why else ''}\">{e(why)}</td></tr>"
    )


def _caption_by(c: ClipRow) -> str:
    """Who made a caption, under it: the captioner and model; the prompt in the tooltip."""
    by = c.caption_by
    if not by:
        return ""
    label = " · ".join(x for x in (by.get("captioner", ""), by.get("model", "")) if x)
    tip = f" title=\"prompt: {e(by['prompt'])}\"" if by.get("prompt") else ""
    return f"<br><span class=\"muted caption-by\"{tip}>by {e(label)}</span>"


def _name(source: Any) -> str:
    return os.path.basename(str(source)) or str(source)
