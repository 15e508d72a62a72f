"""The built-in vfm-curator plugin: registers through the same hooks as any third-party plugin."""

from __future__ import annotations

from vfm_curator.hookspecs import Register
from vfm_curator.plugins import hookimpl


@hookimpl
def vfm_curator_register_stages(register: Register) -> None:
    """Built-in stages."""
