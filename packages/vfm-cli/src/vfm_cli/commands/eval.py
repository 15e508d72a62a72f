"""``vfm eval``: score generated videos against their prompts with registered metrics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from vfm_cli.failing import fail

from vfm_cli.commands.generate import read_prompts_file as _read_prompts


def _parse_options(items: List[str], metrics: List[str]) -> dict[str, dict]:
    """``--option shapes.flat_rms=20`` -> {"shapes": {"flat_rms": 20}}; values are read as TOML."""
    import tomllib

    options: dict[str, dict] = {m: {} for m in metrics}
    for item in items:
        key, sep, raw = item.partition("=")
        metric, dot, name = key.strip().partition(".")
        if not sep or not dot or not name:
            raise typer.BadParameter(f"expected METRIC.KEY=VALUE, got {item!r}", param_hint="--option")
        if metric not in options:
            raise typer.BadParameter(f"{item!r} is for metric {metric!r}, which is not among --metric {', '.join(metrics)}",
                                     param_hint="--option")
        try:
            value = tomllib.loads(f"v = {raw.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw.strip()  # a bare word or a path
        options[metric][name] = value
    return options


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ",".join(_cell(v) for v in value)
    return str(value)


def print_scores(results: dict, console) -> None:
    """A table of per-video rows (the metric's ``columns``, or every key) and one of the summary."""
    from rich.table import Table

    from vfm_cli.tables import print_table
    from vfm_infer.plugins import host
    from vfm_plugins.text import printable, rich_text

    for name, result in results.items():
        if result.per_video:
            columns = list(getattr(host.get("metrics", name), "columns", ()) or result.per_video[0])
            table = Table(title=f"{name}: per video")
            for column in columns:
                table.add_column(column)
            for row in result.per_video:
                table.add_row(*(rich_text(_cell(row.get(c))) for c in columns))
            print_table(table, console)
        summary = Table(title=f"{name}: summary")
        summary.add_column("score")
        summary.add_column("value", justify="right")
        for key, value in result.summary.items():
            summary.add_row(key, _cell(value))
        print_table(summary, console)
        for note in result.notes:
            console.print(printable(f"note: {name}: {note}"), highlight=False, markup=False, soft_wrap=True)


def eval_command(
    videos: Path = typer.Argument(..., help="Folder of generated videos (0000.mp4, 0001.mp4, ...: what `vfm generate` writes)."),
    prompts: Path = typer.Option(..., "--prompts", help="The prompts file given to `vfm generate` (video i is line i)."),
    metric: List[str] = typer.Option(["shapes"], "--metric", help="Metric name (repeatable); see `vfm plugins --kind metrics`."),
    option: List[str] = typer.Option([], "--option", help="A metric option METRIC.KEY=VALUE (repeatable), e.g. a weights path."),
    out: Optional[Path] = typer.Option(None, "-o", "--out", help="Write the scores as JSON here (default: VIDEOS/scores.json)."),
) -> None:
    """Score generated videos against their prompts and write VIDEOS/scores.json.

    Built-in metrics: `shapes` reads the demo's captions ("a red circle moving right") and checks, per
    video, that the background is flat, the shape has the named colour and moves the named way;
    `clip-score` (--option clip-score.model=DIR, a local CLIP or SigLIP folder) scores each video's
    frames against its prompt; `fvd` (--option fvd.reference=DIR --option fvd.weights=I3D.safetensors)
    is the Frechet Video Distance to a folder of real videos. Others plug in through the
    `vfm_infer_register_metrics` hook.
    """
    prompt_list = _read_prompts(prompts)
    path = out or videos / "scores.json"
    if path.is_dir() and not path.is_symlink():  # before scoring, which a metric such as FVD makes long
        fail(f"{path} is a folder; name a file for the scores with -o")
    options = _parse_options(option, metric)

    import warnings

    from rich.console import Console

    from vfm_infer.metrics.base import MetricWarning, evaluate, load_metric, read_items, videos_without_prompts

    try:
        # built before any video is read: a missing weights path fails at once, not after decoding
        built = {name: load_metric(name, options[name]) for name in metric}
        items = read_items(videos, prompt_list)
        with warnings.catch_warnings():  # a metric's caveats are also its notes, printed below as `note:` lines
            warnings.simplefilter("ignore", MetricWarning)
            results = evaluate(items, built)
        extra = videos_without_prompts(videos, prompt_list)
    except (KeyError, ValueError, TypeError, FileNotFoundError) as exc:
        fail(exc)
    if extra:  # scored against nothing before, without a word: the sign of another prompts file
        typer.echo(f"note: {len(extra)} video{'s have' if len(extra) > 1 else ' has'} no line in the prompts file "
                   f"({len(prompt_list)} prompts), not scored: {', '.join(extra[:3])}{', ...' if len(extra) > 3 else ''}; "
                   "is it the file given to vfm generate?", err=True)
    print_scores(results, Console())
    shapes = results.get("shapes")
    if list(results) == ["shapes"] and shapes.summary.get("videos") and not shapes.summary.get("scored"):
        # the default metric knows the demo's captions only: a user's own prompts need another metric (a user
        # who asked for one beside shapes has it)
        typer.echo("note: to score videos against your own prompts: --metric clip-score --option clip-score.model=DIR "
                   "(a local CLIP or SigLIP folder), or --metric fvd --option fvd.reference=DIR --option "
                   "fvd.weights=I3D.safetensors (the distance to a folder of real videos)", err=True)
    payload = {name: {"summary": r.summary, "per_video": r.per_video, **({"notes": r.notes} if r.notes else {})}
               for name, r in results.items()}
    payload = _with_earlier_scores(path, payload, [item.path for item in items])
    path.parent.mkdir(parents=True, exist_ok=True)
    _replace(path, json.dumps(payload, indent=2) + "\n")
    typer.echo(str(path))


def _with_earlier_scores(path: Path, payload: dict, scored: list[Path]) -> dict:
    """``payload`` plus the scores of other metrics that ``path`` already holds, kept when no scored video
    changed after they were written: a run of one metric (``--metric fvd``, which may take hours) replaced
    the file whole, losing the others' scores (the demo's ``shapes``) without a word. Scores older than a
    video are dropped, and either is said in a note."""
    from vfm_plugins.json_data import loads  # nested too deep is a ValueError, not a RecursionError

    try:
        earlier = loads(path.read_text(encoding="utf-8")) if path.is_file() and not path.is_symlink() else {}
        written_ns = path.stat().st_mtime_ns if earlier else 0
    except (OSError, ValueError):  # not scores this command wrote: replaced, as before
        return payload
    if not isinstance(earlier, dict):
        return payload
    others = {name: entry for name, entry in earlier.items()
              if name not in payload and isinstance(entry, dict) and "summary" in entry}
    if not others:
        return payload
    changed = [p for p in scored if p.stat().st_mtime_ns > written_ns]
    names = ", ".join(others)
    if changed:
        typer.echo(f"note: dropped the earlier scores of {names} from {path}: {changed[0].name}"
                   f"{f' and {len(changed) - 1} more videos' if len(changed) > 1 else ''} changed after they were "
                   f"written; run --metric {' --metric '.join(others)} again to score these videos", err=True)
        return payload
    typer.echo(f"note: {path} keeps the earlier scores of {names} beside this run's (no video changed since)", err=True)
    return {**others, **payload}


def _replace(path: Path, text: str) -> None:
    """Write ``text`` as a fresh file renamed over ``path``: a ``scores.json`` that is a symbolic link
    (a videos folder from elsewhere holding ``scores.json -> ~/.bashrc``) is replaced, never written through."""
    from vfm_plugins.files import replace_file

    replace_file(path, text)


def register(app: typer.Typer) -> None:
    app.command("eval", no_args_is_help=True)(eval_command)
