"""Hook specifications of the vfm_infer plugin host: each hook receives one
:class:`vfm_plugins.Register` callback and calls it once per name it provides."""

from __future__ import annotations

import pluggy

from vfm_plugins import Register

hookspec = pluggy.HookspecMarker("vfm_infer")


@hookspec
def vfm_infer_register_samplers(register: Register) -> None:
    """Register samplers (edm-heun, edm-euler, dpm-solver++, flow-euler, flow-heun, ...). Target: a sampler class; each declares the formulation it samples."""


@hookspec
def vfm_infer_register_metrics(register: Register) -> None:
    """Register metrics of generated videos (shapes, ...; later e.g. FVD with local I3D weights, CLIP score). Target: a :class:`vfm_infer.metrics.Metric` subclass, built with the user's options; ``vfm eval --metric NAME`` runs it."""
