"""Hook specifications of the vfm_parallel plugin host.

Every hook receives one argument, ``register``: call ``register(name, target, description=...)``
once per thing you provide. ``target`` is the object itself or a lazy ``"module:attr"`` string that
is imported only when the name is used. A name registered twice is an error naming both providers.
"""

from __future__ import annotations

from typing import Any, Protocol

import pluggy

hookspec = pluggy.HookspecMarker("vfm_parallel")


class Register(Protocol):
    """The callback every hook receives."""

    def __call__(self, name: str, target: Any, *, description: str = "") -> None: ...


@hookspec
def vfm_parallel_register_strategies(register: Register) -> None:
    """Register parallel strategies (ddp, fsdp, hsdp, tp, sp, pp, cp-ring, cp-ulysses, cp-hybrid, ...). Target: a strategy object or factory; see `vfm_parallel` docs for its interface."""
