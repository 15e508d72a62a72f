"""Hook specifications of the vfm_infer plugin host.

Every hook receives one argument, ``register``: call ``register(name, target, description=...)``
once per thing you provide. ``target`` is the object itself or a lazy ``"module:attr"`` string that
is imported only when the name is used. A name registered twice is an error naming both providers.
"""

from __future__ import annotations

from typing import Any, Protocol

import pluggy

hookspec = pluggy.HookspecMarker("vfm_infer")


class Register(Protocol):
    """The callback every hook receives."""

    def __call__(self, name: str, target: Any, *, description: str = "") -> None: ...


@hookspec
def vfm_infer_register_samplers(register: Register) -> None:
    """Register samplers (edm-heun, edm-euler, dpm-solver++, flow-euler, flow-heun, ...). Target: a sampler class; each declares the formulation it samples."""
