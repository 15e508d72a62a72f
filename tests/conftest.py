"""Shared fixtures: real third-party plugin packages installed with pip into a temporary target."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN_PACKAGES = Path(__file__).parent / "plugin_packages"

# Tests compare numbers across processes; keep every test process to one intra-op thread so that
# parallel runs on the 2-core CI machine do not oversubscribe it.
os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` are skipped where no CUDA device is visible (every CI machine)."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU (none visible here)")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def installed_plugins(tmp_path_factory):
    """``installed_plugins(name)``: pip-installs ``tests/plugin_packages/<name>`` into its own
    folder (real wheel build, real dist-info and entry points) and returns that folder."""
    cache: dict[str, Path] = {}

    def install(name: str) -> Path:
        if name not in cache:
            target = tmp_path_factory.mktemp(name)
            subprocess.run(
                [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                 "--no-index", "--target", str(target), str(PLUGIN_PACKAGES / name)],
                check=True,
            )
            cache[name] = target
        return cache[name]

    return install


@pytest.fixture
def with_plugins(installed_plugins, monkeypatch):
    """``with_plugins(*names)``: makes those installed plugin packages importable and
    discoverable in this process, and resets every host so it rediscovers entry points."""
    from vfm_cli.hosts import all_hosts

    def activate(*names: str) -> list[Path]:
        paths = [installed_plugins(n) for n in names]
        for path in paths:
            monkeypatch.syspath_prepend(str(path))
        for host in all_hosts():
            host.reload()
        return paths

    yield activate
    for host in all_hosts():
        host.reload()


def plugin_env(paths: list[Path]) -> dict[str, str]:
    """An environment for a subprocess that sees the given plugin folders."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), env.get("PYTHONPATH", "")])
    return env
