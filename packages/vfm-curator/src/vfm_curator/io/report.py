"""``report.html``: the run's summary, its failures and a contact sheet of clip thumbnails.

Every link is relative (``thumbs/<id>.jpg``, ``clips/<id>.mp4``), so the folder can be moved.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from vfm_curator.io.paths import atomic_write, safe_join


def write_report(out: Path, summary: Any, ok: list[dict], failed: list[dict]) -> Path:
    e = html.escape
    rows = "".join(
        f"<tr><th>{e(k)}</th><td>{e(_fmt(v))}</td></tr>"
        for k, v in summary.as_dict().items()
        if k not in ("decisions",)
    )
    fails = "".join(
        f"<tr><td>{e(r['source'])}</td><td>{e(str((r.get('failure') or {}).get('stage', '')))}</td>"
        f"<td>{e(str((r.get('failure') or {}).get('reason', '')))}</td></tr>"
        for r in failed
    )
    cells = []
    for r in ok:
        for thumb in r.get("thumbs", []):
            clip = "clips/" + Path(thumb).stem + ".mp4"
            if safe_join(out, thumb).exists():
                cells.append(
                    f'<a href="{e(clip)}" title="{e(Path(r["source"]).name)}"><img src="{e(thumb)}" loading="lazy"></a>'
                )
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>vfm curate report</title>
<style>body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse}} td,th{{border:1px solid #ccc;
padding:2px 8px;text-align:left}} .sheet img{{height:96px;margin:2px}}</style></head><body>
<h1>vfm curate</h1>
<h2>Summary</h2><table>{rows}</table>
<h2>Failures ({len(failed)})</h2><table><tr><th>source</th><th>stage</th><th>reason</th></tr>{fails}</table>
<h2>Contact sheet ({len(cells)} clips)</h2><div class="sheet">{''.join(cells)}</div>
</body></html>
"""
    path = safe_join(out, "report.html")
    atomic_write(path, page.encode("utf-8"))
    return path


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
