"""The five library plugin hosts, imported on demand (they are cheap: no torch or ray at import)."""

from __future__ import annotations

import importlib

HOST_MODULES = ("vfm_models", "vfm_parallel", "vfm_data", "vfm_curator", "vfm_infer")


def all_hosts() -> list:
    """Every installed host; a library package that is not installed is skipped."""
    hosts = []
    for name in HOST_MODULES:
        try:
            module = importlib.import_module(f"{name}.plugins")
        except ModuleNotFoundError as exc:
            if exc.name in (name, f"{name}.plugins"):
                continue
            raise
        hosts.append(module.host)
    return hosts
