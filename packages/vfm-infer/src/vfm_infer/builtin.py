"""The built-in vfm-infer plugin: registers through the same hooks as any third-party plugin."""

from __future__ import annotations

from vfm_infer.hookspecs import Register
from vfm_infer.plugins import hookimpl


@hookimpl
def vfm_infer_register_samplers(register: Register) -> None:
    """Built-in samplers."""
