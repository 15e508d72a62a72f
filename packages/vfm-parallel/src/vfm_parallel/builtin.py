"""The built-in vfm-parallel plugin: registers through the same hooks as any third-party plugin."""

from __future__ import annotations

from vfm_parallel.hookspecs import Register
from vfm_parallel.plugins import hookimpl


@hookimpl
def vfm_parallel_register_strategies(register: Register) -> None:
    """Built-in strategies."""
