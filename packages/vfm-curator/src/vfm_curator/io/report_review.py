"""The report's sections for the whole-folder checks (``review.jsonl``, see
:mod:`vfm_curator.pipelines.review`): captions flagged or dropped by caption QA, each with its
clip's thumbnail, and near-duplicates removed, each beside the clip that was kept. Everything from
the data is escaped."""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from vfm_plugins import json_data

from vfm_curator.io.paths import safe_join

e = html.escape


def href(path: str) -> str:
    """A relative link to a file of the folder, for an ``href``/``src`` attribute: percent-encoded (a
    name's ``:`` cannot make it a ``javascript:`` URL, ``#`` and ``?`` stay part of the name), then escaped."""
    return e(quote(str(path), safe="/"), quote=True)

REVIEW_FILE = "review.jsonl"
#: The caption_qa stage's scores (in clips.parquet's ``scores``): caption-frame cosine, VLM P(yes).
CLIP_SCORE = "caption_clip"
VLM_SCORE = "caption_vlm"


def read_review(out: Path) -> list[dict[str, Any]]:
    """The entries of ``out/review.jsonl`` (none when the file is absent)."""
    path = safe_join(out, REVIEW_FILE)
    if not path.is_file():
        return []
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entries.append(json_data.loads(line))
        except ValueError:
            continue
    return entries


def _thumb(out: Path, clip_id: str, path: str | None) -> str:
    """The clip's thumbnail (linked to its file when that exists), or its id."""
    try:
        thumb = f"thumbs/{clip_id}.jpg"
        img = f"<img src=\"{href(thumb)}\" alt=\"\" loading=\"lazy\">" if safe_join(out, thumb).is_file() else ""
        link = path if path and safe_join(out, path).is_file() else None
    except (ValueError, OSError):
        img, link = "", None
    inner = img or e(clip_id)
    return f"<a href=\"{href(link)}\">{inner}</a>" if link else inner


def _name(source: Any) -> str:
    return os.path.basename(str(source)) or str(source)


def caption_section(out: Path, entries: list[dict[str, Any]], scored: int) -> str:
    """Flagged and dropped captions (worst first) with their clip's frame, score and reason."""
    rows = [x for x in entries if x.get("check") == "caption_qa"]
    head = (f"<h2>Caption QA <span class=\"muted\">({scored} captions scored, {sum(x['action'] == 'flagged' for x in rows)} "
            f"flagged, {sum(x['action'] == 'removed' for x in rows)} dropped)</span></h2>")
    if not rows:
        return head + "<p>No caption under the thresholds.</p>"
    body = "".join(
        f"<tr class=\"caption-qa\" data-id=\"{e(str(x['id']))}\" data-action=\"{e(x['action'])}\">"
        f"<td class=\"thumb\">{_thumb(out, str(x['id']), x.get('path'))}</td>"
        f"<td class=\"caption\">{e(str(x.get('caption') or ''))}</td>"
        f"<td title=\"{e(str(x.get('source', '')))}\">{e(_name(x.get('source', '')))} "
        f"<span class=\"muted\">{float(x.get('start_s') or 0):.2f}–{float(x.get('end_s') or 0):.2f} s</span></td>"
        f"<td>{'dropped' if x['action'] == 'removed' else 'flagged'}</td><td class=\"why\">{e(str(x.get('why', '')))}</td></tr>"
        for x in rows
    )
    return (head + "<table class=\"review\" id=\"caption-qa\"><thead><tr><th>frame</th><th>caption</th><th>clip</th>"
            f"<th>action</th><th>why</th></tr></thead><tbody>{body}</tbody></table>")


def dedup_section(out: Path, entries: list[dict[str, Any]]) -> str:
    """Each removed near-duplicate beside the clip kept in its place."""
    rows = [x for x in entries if x.get("check") == "dedup"]
    head = f"<h2>Duplicates <span class=\"muted\">({len(rows)} near-duplicate clips removed)</span></h2>"
    if not rows:
        return head + "<p>No near-duplicate clips.</p>"
    body = "".join(_duplicate_row(out, x) for x in rows)
    return (head + "<table class=\"review\" id=\"duplicates\"><thead><tr><th>removed</th><th>clip</th><th>kept</th>"
            f"<th>clip</th><th>cosine</th></tr></thead><tbody>{body}</tbody></table>")


def _duplicate_row(out: Path, x: dict[str, Any]) -> str:
    kept = str(x.get("kept_id", ""))
    return (
        f"<tr class=\"duplicate\" data-id=\"{e(str(x['id']))}\" data-kept=\"{e(kept)}\">"
        f"<td class=\"thumb\">{_thumb(out, str(x['id']), x.get('path'))}</td>"
        f"<td>{e(str(x['id']))}<br><span class=\"muted\" title=\"{e(str(x.get('source', '')))}\">"
        f"{e(_name(x.get('source', '')))} {float(x.get('start_s') or 0):.2f}–{float(x.get('end_s') or 0):.2f} s</span></td>"
        f"<td class=\"thumb\">{_thumb(out, kept, f'clips/{kept}.mp4')}</td>"
        f"<td>{e(kept)}<br><span class=\"muted\" title=\"{e(str(x.get('kept_source', '')))}\">"
        f"{e(_name(x.get('kept_source', '')))}</span></td>"
        f"<td class=\"num\">{float(x.get('similarity') or 0):.4f}</td></tr>"
    )
