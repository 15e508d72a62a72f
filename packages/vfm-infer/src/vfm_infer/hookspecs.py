"""Hook specifications of the vfm_infer plugin host: each hook receives one
:class:`vfm_plugins.Register` callback and calls it once per name it provides."""

from __future__ import annotations

import pluggy

from vfm_plugins import Register

hookspec = pluggy.HookspecMarker("vfm_infer")


@hookspec
def vfm_infer_register_samplers(register: Register) -> None:
    """Register samplers (edm-heun, edm-euler, dpm-solver++, flow-euler, flow-heun, ...). Target: a sampler class; each declares the formulation it samples."""
