"""The built-in vfm-data plugin: registers through the same hooks as any third-party plugin."""

from __future__ import annotations

from vfm_data.hookspecs import Register
from vfm_data.plugins import hookimpl


@hookimpl
def vfm_data_register_blenders(register: Register) -> None:
    """Built-in blenders."""
