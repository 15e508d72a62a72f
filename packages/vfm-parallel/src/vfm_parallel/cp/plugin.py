"""Registers the context-parallel strategies through the vfm_parallel hook, like any plugin."""

from __future__ import annotations

from vfm_parallel.hookspecs import Register
from vfm_parallel.plugins import hookimpl


@hookimpl
def vfm_parallel_register_strategies(register: Register) -> None:
    """Built-in context-parallel strategies."""
