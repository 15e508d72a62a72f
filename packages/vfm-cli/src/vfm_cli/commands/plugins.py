"""``vfm plugins``: every registered kind, name, provider and version, and plugins that failed."""

from __future__ import annotations

import json
import sys

import typer

from vfm_cli.failing import fail


def plugins(
    as_json: bool = typer.Option(False, "--json", help="Print JSON rows instead of a table."),
    kind: str = typer.Option(None, "--kind", help="Only this kind (e.g. families, samplers)."),
) -> None:
    """List every plugin-provided name: kind, name, provider, version and status."""
    import warnings

    from vfm_cli.hosts import all_hosts
    from vfm_plugins import FailedPlugin, PluginError, misplaced_entry_points

    rows, broken = [], []
    hosts = all_hosts()
    with warnings.catch_warnings():
        # Failed plugins are shown as rows with status "failed"; no need to print the warning too.
        warnings.simplefilter("ignore")
        for host in hosts:
            try:
                rows += host.describe()
            except PluginError as exc:  # e.g. a name registered twice: that host is unusable, the others are listed
                broken.append(str(exc))
                rows.append(FailedPlugin(host.project, host.project, "-", "-", str(exc)).row())
    # a plugin whose entry-point group is misspelt would otherwise be silently absent
    rows += [f.row() for f in misplaced_entry_points(host.project for host in hosts)]
    if kind is not None:
        kinds = sorted({k for host in hosts for k in host.kinds})  # a broken host's kinds too
        if kind not in kinds:
            raise typer.BadParameter(f"unknown kind {kind!r}; kinds: {', '.join(kinds)}", param_hint="--kind")
        rows = [r for r in rows if r["kind"] in (kind, "-")]
    if as_json:
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print_table(rows)
    if broken:  # after the listing, so that what still works is shown
        fail(broken[0] if len(broken) == 1 else "; ".join(broken))


def _print_table(rows: list[dict[str, str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    from vfm_cli.tables import print_table
    from vfm_plugins.text import rich_text

    table = Table(title="vfm plugins")
    for column in ("host", "kind", "name", "provider", "version", "status", "description"):
        table.add_column(column)
    for r in rows:
        style = "red" if r["status"] == "failed" else None
        # names, versions and descriptions come from installed packages: shown as text, never as markup or controls
        table.add_row(*(rich_text(r[c]) for c in ("host", "kind", "name", "provider", "version", "status", "description")),
                      style=style)
    print_table(table, Console())


def register(app: typer.Typer) -> None:
    app.command("plugins")(plugins)
