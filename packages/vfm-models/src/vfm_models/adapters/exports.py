"""External checkpoints <-> vfm inference exports: convert one into an export (on disk or in memory)
and write an export back in an external format (a diffusers model folder).

A converted export is an ordinary one (``model.safetensors`` + ``config.json``): it names its family
and options, the formulation the checkpoint was trained with, its latent shape and null condition,
and ``converted_from`` (the adapter's name; never a path, so the export stays self-contained).
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any, Mapping

import torch

from vfm_models.adapters.base import AdapterConfigError, StateDictAdapter, adapter_names, get_adapter, is_metadata_key
from vfm_models.adapters.io import load_external, save_diffusers_folder


def is_external_folder(folder: str | PathLike) -> bool:
    """Whether ``folder`` is a diffusers model (or pipeline) folder rather than a vfm export: its
    ``config.json`` names a ``_class_name``, or it has a ``transformer/`` model folder."""
    from vfm_plugins import json_data

    folder = Path(folder)
    if (folder / "transformer" / "config.json").is_file() and not (folder / "model.safetensors").is_file():
        return True
    try:
        return "_class_name" in json_data.loads((folder / "config.json").read_text())
    except (OSError, ValueError, TypeError):
        return False


def converted(src: str | PathLike, adapter: str | StateDictAdapter | None = None,
              config: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(export meta, vfm state dict) of an external checkpoint (see :func:`~vfm_models.adapters.load_external`).
    The weights are checked against the family's model for these options (names and shapes)."""
    import vfm_models
    from vfm_models.conditioning import describe

    ckpt = load_external(src, adapter, config)
    options, state = ckpt.to_vfm()
    family = vfm_models.get_family(ckpt.adapter.family)
    cfg = family.config(**{k: tuple(v) if isinstance(v, list) else v for k, v in options.items()})
    meta = {"family": ckpt.adapter.family, "config": options, **ckpt.adapter.meta_from_external(ckpt.config),
            "null_condition": describe(cfg), "converted_from": {"adapter": ckpt.adapter.name}}
    return meta, state


def convert_to_export(src: str | PathLike, out: str | PathLike, *, adapter: str | StateDictAdapter | None = None,
                      config: Mapping[str, Any] | None = None, meta: Mapping[str, Any] | None = None) -> Path:
    """Write the vfm export of an external checkpoint to ``out``; ``meta`` adds or replaces export
    fields (``tokenizer``, ``tokenizer_options``, ``latent_shape``, ...). Returns ``out``."""
    from vfm_models.export import save_export

    export_meta, state = converted(src, adapter, config)
    merged = {**export_meta, **(meta or {})}
    # vfm convert records what the checkpoint implies and what it is given (a tokenizer only when named, no
    # text encoder: docs/public-checkpoints.md adds it by hand): a weights-only export (for vfm export --format
    # diffusers, model.init_from) unless given all generation needs; what it names is checked (a latent_shape
    # whose C is not in_channels was written as given and failed only when generating)
    return save_export(out, state, merged, for_generation=False)


def load_converted(src: str | PathLike, adapter: str | StateDictAdapter | None = None,
                   meta: Mapping[str, Any] | None = None) -> tuple[torch.nn.Module, dict[str, Any]]:
    """(model in eval mode, export meta) of an external checkpoint, converted in memory."""
    import vfm_models
    from vfm_models.checkpoint import load_into

    export_meta, state = converted(src, adapter)
    export_meta.update(meta or {})
    family = vfm_models.get_family(export_meta["family"])
    options = {k: tuple(v) if isinstance(v, list) else v for k, v in export_meta["config"].items()}
    model = load_into(family.build(family.config(**options)), state)
    return model.eval(), export_meta


def diffusers_adapter_for(family: str) -> StateDictAdapter:
    """The registered adapter that writes ``family`` as a diffusers model folder."""
    fitting = [get_adapter(n) for n in adapter_names()]
    fitting = [a for a in fitting if a.family == family and a.diffusers_class]
    if not fitting:
        raise AdapterConfigError(f"no registered adapter writes family {family!r} as a diffusers folder "
                                 f"(adapters: {', '.join(adapter_names())})")
    return fitting[0]


def export_to_external(export: str | PathLike, out: str | PathLike, *,
                       adapter: str | StateDictAdapter | None = None) -> Path:
    """Write the vfm export in ``export`` as a diffusers model folder in ``out`` (``from_pretrained``
    loads it). ``adapter``: the format (default: the diffusers adapter of the export's family)."""
    from vfm_models.checkpoint import load_state_dict
    from vfm_models.export import WEIGHTS, check_finite, read_meta

    meta = read_meta(export)
    adapter = get_adapter(adapter) if isinstance(adapter, str) else adapter or diffusers_adapter_for(meta["family"])
    if adapter.family != meta["family"]:
        raise AdapterConfigError(f"adapter {adapter.name!r} converts family {adapter.family!r}; this export is a {meta['family']!r}")
    if not adapter.diffusers_class:
        raise AdapterConfigError(f"adapter {adapter.name!r} does not write diffusers folders")
    state = load_state_dict(Path(export) / WEIGHTS)
    check_finite(state, f"refusing to export {export}")
    options = dict(meta["config"])
    config = {**adapter.options_to_external(options), **adapter.external_from_meta(meta)}
    return save_diffusers_folder(out, adapter.to_external(state, options), config, adapter.diffusers_class)


# --- a run that starts from a checkpoint (a train config's model.init_from) --------------------------

def is_vfm_export(path: Path) -> bool:
    """Whether ``path`` is a vfm export folder (its meta and weights on disk: nothing to convert)."""
    from vfm_models.export import CONFIG, WEIGHTS

    return (path / CONFIG).is_file() and (path / WEIGHTS).is_file()


def source_meta(path: str | PathLike) -> dict[str, Any]:
    """The export meta (family, config, formulation, ...) of a checkpoint to start from: a vfm export,
    a diffusers model folder (only its config.json is read) or a bare weights file (read to convert)."""
    from vfm_models.adapters.io import read_folder_config
    from vfm_models.export import read_meta

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    if is_vfm_export(path):
        return read_meta(path)
    if path.is_dir():
        _, adapter, external = read_folder_config(path)
        external = {k: v for k, v in external.items() if not is_metadata_key(k)}
        return {"family": adapter.family, "config": adapter.options_from_external(external),
                **adapter.meta_from_external(external), "converted_from": {"adapter": adapter.name}}
    return converted(path)[0]


def source_shapes(path: str | PathLike) -> dict[str, tuple[int, ...]]:
    """The vfm tensor names and shapes of a checkpoint to start from (a vfm export's from its
    safetensors header, without reading the tensors)."""
    from safetensors import safe_open

    from vfm_models.export import WEIGHTS, own_file

    path = Path(path)
    if is_vfm_export(path):
        with safe_open(str(own_file(path, WEIGHTS)), framework="pt") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    return {k: tuple(v.shape) for k, v in converted(path)[1].items()}


def source_weights(path: str | PathLike) -> dict[str, torch.Tensor]:
    """The vfm state dict of a checkpoint to start from (converted when it is an external one)."""
    from vfm_models.checkpoint import load_state_dict
    from vfm_models.export import WEIGHTS, own_file

    path = Path(path)
    if is_vfm_export(path):
        return load_state_dict(own_file(path, WEIGHTS))
    return converted(path)[1]
