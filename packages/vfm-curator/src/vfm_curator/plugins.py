"""The vfm_curator plugin host: the hook marker, the manager and the look-ups by name."""

from __future__ import annotations

import pluggy

from vfm_curator import hookspecs
from vfm_plugins import PluginHost

hookimpl = pluggy.HookimplMarker("vfm_curator")

#: Entry-point group, hook prefix and pluggy project name are all ``vfm_curator``; the kinds and the
#: built-ins are declared in ``plugins.toml``.
host = PluginHost(project="vfm_curator", distribution="vfm-curator", hookspecs=hookspecs,
                  declaration=hookspecs.declaration)
