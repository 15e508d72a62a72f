"""The vfm_infer plugin host: the hook marker, the manager and the look-ups by name."""

from __future__ import annotations

import pluggy

from vfm_infer import hookspecs
from vfm_plugins import PluginHost

hookimpl = pluggy.HookimplMarker("vfm_infer")

#: Entry-point group, hook prefix and pluggy project name are all ``vfm_infer``; the kinds and the
#: built-ins are declared in ``plugins.toml``.
host = PluginHost(project="vfm_infer", distribution="vfm-infer", hookspecs=hookspecs,
                  declaration=hookspecs.declaration)
