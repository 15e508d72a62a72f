"""A plugin package made on the spot: a module and a real ``*.dist-info`` (METADATA and
``entry_points.txt``) on ``sys.path``, so ``importlib.metadata`` finds its entry points and the real
hosts load it through pluggy exactly as they load an installed wheel."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def write_plugin(root: Path, dist: str, modules: dict[str, str], entry_points: dict[str, str],
                 version: str = "0.0.1") -> Path:
    """Writes ``modules`` (name -> source) and ``<dist>-<version>.dist-info`` into ``root``;
    ``entry_points`` maps a host's group (``vfm_models``, ...) to the module its plugin is."""
    root.mkdir(parents=True, exist_ok=True)
    for name, source in modules.items():
        (root / f"{name}.py").write_text(textwrap.dedent(source))
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("".join(f"[{group}]\n{dist} = {module}\n\n"
                                                    for group, module in entry_points.items()))
    return root


def vfm(*args: str, env: dict) -> subprocess.CompletedProcess:
    """The ``vfm`` command in a new process with ``env`` (:func:`tests.conftest.plugin_env`)."""
    return subprocess.run([sys.executable, "-m", "vfm_cli.main", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """``plugin(dist, modules, entry_points)``: makes that package discoverable in this process
    and resets every host so it rediscovers entry points; undone after the test."""
    from vfm_cli.hosts import all_hosts

    added: list[str] = []

    def make(dist: str, modules: dict[str, str], entry_points: dict[str, str], version: str = "0.0.1") -> Path:
        root = write_plugin(tmp_path / dist, dist, modules, entry_points, version)
        monkeypatch.syspath_prepend(str(root))
        added.extend(modules)
        for host in all_hosts():
            host.reload()
        return root

    yield make
    monkeypatch.undo()
    for name in added:
        sys.modules.pop(name, None)
    for host in all_hosts():
        host.reload()
