"""State-dict adapters: external checkpoint formats (diffusers, research repos) <-> vfm families.

A plugin kind (``vfm_models_register_adapters``): each adapter is registered under the name of the
external format it reads and writes. :func:`load_external` reads a local diffusers model folder or
a bare weights file; :func:`convert_to_export` / :func:`export_to_external` turn one into a vfm
inference export and back.
"""

from vfm_models.adapters.base import (
    AdapterConfigError,
    AdapterKeyError,
    StateDictAdapter,
    adapter_names,
    check_keys,
    get_adapter,
)
from vfm_models.adapters.io import ExternalCheckpoint, load_external, save_diffusers_folder

__all__ = [
    "AdapterConfigError", "AdapterKeyError", "StateDictAdapter", "adapter_names", "check_keys", "get_adapter",
    "ExternalCheckpoint", "load_external", "save_diffusers_folder",
]
