"""Hook specifications of the vfm_data plugin host: each hook receives one
:class:`vfm_plugins.Register` callback and calls it once per name it provides."""

from __future__ import annotations

import pluggy

from vfm_plugins import Register

hookspec = pluggy.HookspecMarker("vfm_data")


@hookspec
def vfm_data_register_blenders(register: Register) -> None:
    """Register dataset blenders (weighted, step-scheduled, bucketed). Target: a factory that builds a blender from its config."""
