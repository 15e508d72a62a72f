"""What a state-dict adapter is, the look-up by name, and the key check every conversion ends with.

An adapter translates one external checkpoint format (a diffusers model class, a research repo's
state-dict layout) to and from one vfm family: its config (``options_*``) and its weights
(``*_external``). Adapters are a plugin kind (``vfm_models_register_adapters``), registered under
the name of the external format, so a third-party family can bring its own.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from vfm_models.checkpoint import mismatch


class AdapterKeyError(ValueError):
    """A state dict whose keys or shapes are not the ones expected: names the missing and unexpected
    keys and the differing shapes (a checkpoint of another family or size)."""


class AdapterConfigError(ValueError):
    """An external config (or a vfm config) that the other side cannot express: names the fields."""


def is_metadata_key(key: str) -> bool:
    """Whether an external config key is its writer's metadata, not the model: every key that starts
    with ``_`` (diffusers' ``_class_name``, ``_diffusers_version``, ``_name_or_path``,
    ``_use_default_values``; transformers' ``_commit_hash``, ...). Every adapter ignores these."""
    return key.startswith("_")


def check_config_keys(config: Mapping[str, Any], accepted: Any, what: str) -> None:
    """Refuse an external config key that is neither metadata (:func:`is_metadata_key`) nor in
    ``accepted``, naming it and the accepted keys: a key the adapter does not understand may change
    what the checkpoint computes, so it is never dropped without a word. Every adapter calls this."""
    unknown = sorted(k for k in config if not is_metadata_key(k) and k not in accepted)
    if unknown:
        raise AdapterConfigError(f"unknown {what} config key(s) {', '.join(unknown)}; accepted: {', '.join(sorted(accepted))} "
                                 "(and metadata keys starting with '_')")


class StateDictAdapter:
    """Converts one external format to and from one vfm family. Subclass per format.

    ``name``: the registry name, the external format (``"diffusers-dit"``); ``family``: the vfm family
    it converts to (``"dit"``); ``diffusers_class``: the diffusers model class (``config.json``'s
    ``_class_name``), or None for a format that is not a diffusers one.
    """

    name: str = ""
    family: str = ""
    diffusers_class: str | None = None

    def options_from_external(self, external_config: dict) -> dict:
        """The vfm family options (the ``config`` section of a vfm export) of an external config.
        Refuses a key it does not know (:func:`check_config_keys`) and ignores metadata keys (``_*``)."""
        raise NotImplementedError

    def options_to_external(self, options: dict) -> dict:
        """The external config (a diffusers ``config.json`` dict, without ``_class_name``) of vfm options."""
        raise NotImplementedError

    def from_external(self, state_dict: dict[str, torch.Tensor], options: dict) -> dict[str, torch.Tensor]:
        """The vfm state dict of an external one (``options``: the vfm options it was converted with)."""
        raise NotImplementedError

    def to_external(self, state_dict: dict[str, torch.Tensor], options: dict) -> dict[str, torch.Tensor]:
        """The external state dict of a vfm one."""
        raise NotImplementedError

    # --- optional: what a format carries besides the model's own config -----------------------

    def meta_from_external(self, external_config: dict) -> dict[str, Any]:
        """Export metadata the external config implies beyond the family options (``latent_shape``,
        ``formulation``, ``guidance``, ...): merged into a converted export's ``config.json``."""
        return {}

    def external_from_meta(self, meta: Mapping[str, Any]) -> dict[str, Any]:
        """External config fields that come from a vfm export's metadata rather than the family
        options (diffusers' DiT ``sample_size`` from ``latent_shape``): merged into ``options_to_external``."""
        return {}

    def config_from_state_dict(self, state_dict: Mapping[str, torch.Tensor]) -> dict:
        """The external config of a format that ships weights without one (a bare ``.pt``), read
        from the weights' shapes. Formats with a ``config.json`` do not need it."""
        raise AdapterConfigError(f"adapter {self.name!r} reads its config from config.json; "
                                 "give a model folder with config.json next to the weights")

    def accepts_class(self, class_name: str | None, external_config: Mapping[str, Any]) -> bool:
        """Whether a diffusers ``config.json`` with this ``_class_name`` is this format (default: the
        name is ``diffusers_class``; an adapter may also take a legacy class name)."""
        return class_name is not None and class_name == self.diffusers_class

    def matches(self, state_dict: Mapping[str, torch.Tensor]) -> bool:
        """Whether a bare state dict (no config.json) is in this format (used to detect it)."""
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, family={self.family!r})"


def get_adapter(name: str) -> StateDictAdapter:
    """The adapter registered as ``name`` (an unknown name raises an error listing the registered ones)."""
    from vfm_models.plugins import host

    adapter = host.get("adapters", name)
    return adapter() if isinstance(adapter, type) else adapter


def adapter_names() -> list[str]:
    from vfm_models.plugins import host

    return sorted(host.names("adapters"))


def check_keys(expected: Mapping[str, Any], got: Mapping[str, Any], what: str) -> None:
    """Raise :class:`AdapterKeyError` unless ``got`` has exactly the keys of ``expected`` with the same
    shapes. Values are tensors or shapes; ``what`` names the checkpoint in the message."""
    problems = mismatch(expected, got, ("missing", "unexpected"), "{key}: {got} where {expected} is expected")
    if not problems:
        return
    raise AdapterKeyError(f"{what} does not fit: " + problems
                          + "\n(a checkpoint of another family or size, or read with the wrong adapter)")
