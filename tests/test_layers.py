"""What may import what (docs/architecture.md, "Invariants"), read from the sources without importing them."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Which other vfm packages each package may import (DESIGN section 2: no cycles, and vfm-models
#: and vfm-parallel never import each other).
ALLOWED = {
    "vfm_plugins": set(),
    "vfm_models": {"vfm_plugins"},
    "vfm_parallel": {"vfm_plugins"},
    "vfm_data": {"vfm_plugins"},
    "vfm_curator": {"vfm_plugins", "vfm_data", "vfm_models"},
    "vfm_infer": {"vfm_plugins", "vfm_models", "vfm_parallel"},
    "vfm_cli": {"vfm_plugins", "vfm_models", "vfm_parallel", "vfm_data", "vfm_curator", "vfm_infer"},
}

#: vfm-curator's floors: a module imports only from its own floor or lower ones. A new top-level
#: module or folder gets a floor here.
CURATOR_FLOORS = {
    "errors": 0, "failures": 0, "colour": 0, "tasks": 0, "config": 0, "synth": 0, "hookspecs": 0, "plugins": 0,
    "io": 1, "embedders": 1, "captioners": 1, "dedup": 1, "shot_detectors": 1, "decoders": 1,
    "stages": 2,
    "execution": 3,
    "pipelines": 4,
    "api": 5, "builtin": 5, "sharding_plugin": 5, "__init__": 5,
}


def _imports(path: Path) -> set[str]:
    """Absolute module names ``path`` imports (``from a.b import c`` gives ``a.b`` and ``a.b.c``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _sources(module: str):
    package = ROOT / "packages" / module.replace("_", "-") / "src" / module
    return sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts), package


def test_packages_import_only_the_packages_below_them():
    assert {p.name for p in (ROOT / "packages").iterdir() if (p / "src").is_dir()} == {
        m.replace("_", "-") for m in ALLOWED
    }
    wrong = []
    for module, allowed in ALLOWED.items():
        files, package = _sources(module)
        for path in files:
            used = {n.split(".")[0] for n in _imports(path) if n.startswith("vfm_")} - {module}
            wrong += [f"{path.relative_to(ROOT)} imports {other}" for other in sorted(used - allowed)]
    assert wrong == []


def test_curator_modules_import_only_their_own_floor_or_lower():
    files, package = _sources("vfm_curator")
    wrong = []
    for path in files:
        area = path.relative_to(package).parts[0].removesuffix(".py")
        assert area in CURATOR_FLOORS, f"give vfm_curator.{area} a floor in CURATOR_FLOORS"
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] != "vfm_curator" or len(parts) < 2 or parts[1] not in CURATOR_FLOORS:
                continue  # `from vfm_curator import hookimpl` resolves through vfm_curator.plugins (floor 0)
            if CURATOR_FLOORS[parts[1]] > CURATOR_FLOORS[area]:
                wrong.append(f"{path.relative_to(package)} (floor {CURATOR_FLOORS[area]}) imports {name}")
    assert wrong == []
