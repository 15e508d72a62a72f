"""The vfm_models plugin host: the hook marker, the manager and the look-ups by name."""

from __future__ import annotations

import pluggy

from vfm_models import hookspecs
from vfm_plugins import PluginHost

hookimpl = pluggy.HookimplMarker("vfm_models")

#: Entry-point group, hook prefix and pluggy project name are all ``vfm_models``; the kinds and the
#: built-ins are declared in ``plugins.toml``.
host = PluginHost(project="vfm_models", distribution="vfm-models", hookspecs=hookspecs,
                  declaration=hookspecs.declaration)
