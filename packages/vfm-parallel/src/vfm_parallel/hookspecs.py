"""Hook specifications of the vfm_parallel plugin host: each hook receives one
:class:`vfm_plugins.Register` callback and calls it once per name it provides."""

from __future__ import annotations

import pluggy

from vfm_plugins import Register

hookspec = pluggy.HookspecMarker("vfm_parallel")


@hookspec
def vfm_parallel_register_strategies(register: Register) -> None:
    """Register parallel strategies (ddp, fsdp, hsdp, tp, sp, pp, cp-ring, cp-ulysses, cp-hybrid, ...). Target: a strategy object or factory; see `vfm_parallel` docs for its interface."""
