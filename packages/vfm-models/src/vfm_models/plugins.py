"""The vfm_models plugin host: the hook marker, the manager and the look-ups by name."""

from __future__ import annotations

import pluggy

from vfm_models import hookspecs
from vfm_models._plugin_host import PluginHost

hookimpl = pluggy.HookimplMarker("vfm_models")

#: Entry-point group, hook prefix and pluggy project name are all ``vfm_models``.
host = PluginHost(
    project="vfm_models",
    distribution="vfm-models",
    hookspecs=hookspecs,
    builtins=("vfm_models.builtin",),
    kinds={
        "families": "vfm_models_register_families",
        "tokenizers": "vfm_models_register_tokenizers",
        "text_encoders": "vfm_models_register_text_encoders",
        "formulations": "vfm_models_register_formulations",
    },
)
