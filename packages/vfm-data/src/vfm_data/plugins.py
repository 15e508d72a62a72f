"""The vfm_data plugin host: the hook marker, the manager and the look-ups by name."""

from __future__ import annotations

import pluggy

from vfm_data import hookspecs
from vfm_plugins import PluginHost

hookimpl = pluggy.HookimplMarker("vfm_data")

#: Entry-point group, hook prefix and pluggy project name are all ``vfm_data``; the kinds and the
#: built-ins are declared in ``plugins.toml``.
host = PluginHost(project="vfm_data", distribution="vfm-data", hookspecs=hookspecs,
                  declaration=hookspecs.declaration)
