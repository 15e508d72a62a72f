"""The vfm_parallel plugin host: the hook marker, the manager and the look-ups by name."""

from __future__ import annotations

import pluggy

from vfm_parallel import hookspecs
from vfm_plugins import PluginHost

hookimpl = pluggy.HookimplMarker("vfm_parallel")

#: Entry-point group, hook prefix and pluggy project name are all ``vfm_parallel``; the kinds are its
#: hookspecs ``vfm_parallel_register_<kind>``.
host = PluginHost(project="vfm_parallel", distribution="vfm-parallel", hookspecs=hookspecs,
                  builtins=("vfm_parallel.builtin", "vfm_parallel.cp.plugin", "vfm_parallel.engines.megatron.plugin"))
