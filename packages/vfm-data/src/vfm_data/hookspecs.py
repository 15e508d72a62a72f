"""Hook specifications of the vfm_data plugin host.

Every hook receives one argument, ``register``: call ``register(name, target, description=...)``
once per thing you provide. ``target`` is the object itself or a lazy ``"module:attr"`` string that
is imported only when the name is used. A name registered twice is an error naming both providers.
"""

from __future__ import annotations

from typing import Any, Protocol

import pluggy

hookspec = pluggy.HookspecMarker("vfm_data")


class Register(Protocol):
    """The callback every hook receives."""

    def __call__(self, name: str, target: Any, *, description: str = "") -> None: ...


@hookspec
def vfm_data_register_blenders(register: Register) -> None:
    """Register dataset blenders (weighted, step-scheduled, bucketed). Target: a factory that builds a blender from its config."""
