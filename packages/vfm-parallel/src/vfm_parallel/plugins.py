"""The vfm_parallel plugin host: the hook marker, the manager and the look-ups by name."""

from __future__ import annotations

import pluggy

from vfm_parallel import hookspecs
from vfm_plugins import PluginHost

hookimpl = pluggy.HookimplMarker("vfm_parallel")

#: Entry-point group, hook prefix and pluggy project name are all ``vfm_parallel``; the kinds and the
#: built-ins are declared in ``plugins.toml``.
host = PluginHost(project="vfm_parallel", distribution="vfm-parallel", hookspecs=hookspecs,
                  declaration=hookspecs.declaration)
