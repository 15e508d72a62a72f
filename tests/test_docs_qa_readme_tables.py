"""The README's package table names every plugin kind each package declares in its plugins.toml (the
hook table below it is checked by tests/test_readme.py)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_package_table_lists_each_packages_plugin_kinds():
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| \[(vfm-[\w-]+)\]\([^)]*\) \| .+ \| (.+) \|$",
                                                         (ROOT / "README.md").read_text(encoding="utf-8"), re.M)}
    declared = {path.parents[2].name: list(tomllib.loads(path.read_text()))
                for path in sorted(ROOT.glob("packages/*/src/*/plugins.toml"))}
    assert set(declared) <= set(rows), f"README's package table has no row for {sorted(set(declared) - set(rows))}"
    for package, kinds in declared.items():
        assert [k.strip() for k in rows[package].split(",")] == kinds, (
            f"README lists {rows[package]!r} as {package}'s plugin kinds; its plugins.toml declares {kinds}")
