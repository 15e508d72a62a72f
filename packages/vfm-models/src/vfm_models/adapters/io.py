"""Reading external checkpoints from local paths and writing diffusers model folders.

Only data is read: ``config.json`` as JSON, weights from safetensors (a diffusers folder, sharded or
not) or, for a bare ``.pt``/``.pth`` file, ``torch.load(weights_only=True)``. A sharded index may
name only files inside its own folder. Nothing is downloaded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, Mapping

import torch
from vfm_plugins import json_data

from vfm_models.adapters.base import AdapterConfigError, StateDictAdapter, adapter_names, get_adapter, is_metadata_key

DIFFUSERS_WEIGHTS = "diffusion_pytorch_model.safetensors"
DIFFUSERS_INDEX = DIFFUSERS_WEIGHTS + ".index.json"
#: The diffusers release whose folder layout and model classes the adapters were checked against.
DIFFUSERS_FORMAT_VERSION = "0.42.1"


@dataclass
class ExternalCheckpoint:
    """An external checkpoint read into memory: its adapter, its external config and its weights."""

    adapter: StateDictAdapter
    config: dict[str, Any]
    state_dict: dict[str, torch.Tensor]
    source: Path

    def options(self) -> dict[str, Any]:
        """The vfm family options."""
        return self.adapter.options_from_external(self.config)

    def to_vfm(self) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        """(vfm family options, vfm state dict); wrong keys or shapes raise ``AdapterKeyError``."""
        options = self.options()
        return options, self.adapter.from_external(self.state_dict, options)


def _adapter_for_class(class_name: str | None, external: Mapping[str, Any], where: Path) -> StateDictAdapter:
    by_class = {}
    for name in adapter_names():
        adapter = get_adapter(name)
        if getattr(adapter, "diffusers_class", None):
            by_class.setdefault(adapter.diffusers_class, adapter)
            if adapter.accepts_class(class_name, external):
                return adapter
    known = ", ".join(f"{c} ({a.name})" for c, a in sorted(by_class.items())) or "(none)"
    raise AdapterConfigError(f"{where}: _class_name {class_name!r} has no registered adapter; known diffusers classes: "
                             f"{known}. Name the format with --from (adapters: {', '.join(adapter_names())})")


def _adapter_for_weights(state: Mapping[str, torch.Tensor], where: Path) -> StateDictAdapter:
    for name in adapter_names():
        adapter = get_adapter(name)
        if adapter.matches(state):
            return adapter
    raise AdapterConfigError(f"{where}: cannot tell which format these weights are in; name it with --from "
                             f"(adapters: {', '.join(adapter_names())})")


def _inside(folder: Path, name: str, what: str) -> Path:
    """The file ``name`` of an index, which must lie in ``folder`` by its name: no absolute path, no
    ``..``. The file itself may be a link, as the unsharded weights file may: the Hugging Face cache
    (``snapshot_download``) links every file of a snapshot to ``../../blobs/<sha256>``, so resolving
    the name first refused every sharded model kept there."""
    parts = Path(name).parts
    path = folder / name
    if not parts or Path(name).is_absolute() or ".." in parts:
        raise AdapterConfigError(f"{what} names {name!r}, which is not a file inside {folder}")
    if not path.exists() and not path.is_symlink():  # a link that leads nowhere is named by _load_safetensors
        raise AdapterConfigError(f"{what} names {name!r}, which is missing from {folder} (an incomplete copy or download?)")
    if path.exists() and not path.is_file():
        raise AdapterConfigError(f"{what} names {name!r}, which is not a file inside {folder}")
    return path


def _load_safetensors(path: Path) -> dict[str, torch.Tensor]:
    """A safetensors file's tensors; a file that is not whole (a copy or download cut short) is one
    error naming it, not safetensors' message alone."""
    import os

    from safetensors import SafetensorError
    from safetensors.torch import load_file

    if path.is_symlink() and not path.exists():  # safetensors said "No such file or directory" of the link
        raise AdapterConfigError(f"{path} is a link to {os.readlink(path)}, which does not exist (a link loop, or a "
                                 "cache whose file was removed)")
    try:
        return load_file(str(path))
    except SafetensorError as exc:
        raise AdapterConfigError(f"{path} is not a complete safetensors file ({exc}): copy it again") from None


def _unpickling_refused(path: Path, exc: Exception) -> AdapterConfigError:
    """Why ``torch.load(weights_only=True)`` refused ``path``, in vfm's words: torch's own message
    says to retry with ``weights_only=False``, which vfm never does (unpickling can run code)."""
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))  # torch's bold text
    convert = ("vfm reads plain tensors only (torch.load with weights_only=True). Where you trust the file, save its "
               "tensors with safetensors.torch.save_file and convert that .safetensors file")
    blocked = re.search(r"GLOBAL ([\w.]+)", text)
    if blocked:
        return AdapterConfigError(f"{path} holds Python objects that only unpickling can rebuild ({blocked.group(1)}), "
                                  f"and unpickling can run code: {convert}")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if text.startswith("Weights only load failed"):  # e.g. a plain pickle.dump: "Unsupported operand 149"
        detail = [ln for ln in lines[1:] if "weights_only" not in ln and not ln.startswith("Check the documentation")]
        return AdapterConfigError(f"{path} is not a torch.save file of plain tensors "
                                  f"({(detail or ['torch refused it'])[-1].removeprefix('WeightsUnpickler error: ')}): {convert}")
    return AdapterConfigError(f"{path} cannot be read as plain weights (torch.load with weights_only=True): "
                              f"{(lines or [type(exc).__name__])[0]}")


def _folder_weights(folder: Path) -> dict[str, torch.Tensor]:
    index = folder / DIFFUSERS_INDEX
    if index.is_file():
        try:
            doc = json_data.loads(index.read_text())
        except json.JSONDecodeError as exc:
            from vfm_models.export import InvalidJSONError

            raise InvalidJSONError.of(exc, str(index)) from None
        if not isinstance(doc, dict):
            raise AdapterConfigError(f"{index} is not a JSON object; accepted: a diffusers index ({{\"weight_map\": "
                                     "{tensor name: shard file}})")
        weight_map = doc.get("weight_map") or {}
        shards = sorted(set(weight_map.values()))
        if not shards or not all(isinstance(s, str) and s.endswith(".safetensors") for s in shards):
            raise AdapterConfigError(f"{index}: weight_map must name .safetensors shards, got {shards[:3]}")
        state: dict[str, torch.Tensor] = {}
        for shard in shards:
            state.update(_load_safetensors(_inside(folder, shard, str(index))))
        return state
    if (folder / DIFFUSERS_WEIGHTS).is_file() or (folder / DIFFUSERS_WEIGHTS).is_symlink():
        return _load_safetensors(folder / DIFFUSERS_WEIGHTS)
    found = sorted(p.name for p in folder.glob("*.safetensors"))
    if len(found) == 1:
        return _load_safetensors(folder / found[0])
    others = sorted(p.name for p in folder.iterdir() if p.suffix in (".bin", ".pt", ".pth", ".ckpt"))
    hint = f" (found {', '.join(others)}: vfm reads a model folder's weights only as safetensors)" if others else ""
    raise FileNotFoundError(f"{folder} has no {DIFFUSERS_WEIGHTS} nor {DIFFUSERS_INDEX}"
                            + (f" and {len(found)} .safetensors files" if found else "") + hint)


def _file_weights(path: Path) -> dict[str, torch.Tensor]:
    if path.suffix == ".safetensors":
        return _load_safetensors(path)
    if path.suffix not in (".pt", ".pth"):
        raise AdapterConfigError(f"{path}: unknown weights file type {path.suffix!r}; accepted: a model folder, "
                                 ".safetensors, .pt, .pth")
    try:
        from vfm_models.checkpoint import check_stored_archive

        check_stored_archive(path)  # a deflated record inflates up to 1000x
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - anything but plain tensors is refused, whatever torch says
        raise _unpickling_refused(path, exc) from None
    if isinstance(state, dict) and not any(isinstance(v, torch.Tensor) for v in state.values()):
        for key in ("ema", "model", "state_dict"):  # a training checkpoint: its (EMA) model weights
            if isinstance(state.get(key), dict):
                state = state[key]
                break
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise AdapterConfigError(f"{path} does not hold a state dict (names -> tensors)")
    return state


def read_folder_config(path: Path, adapter: StateDictAdapter | None = None) -> tuple[Path, StateDictAdapter, dict]:
    """(model folder, adapter, config.json) of a diffusers model folder, or of a pipeline folder's
    ``transformer/``; reads no weights. The adapter comes from ``_class_name`` when not given."""
    if not (path / "config.json").is_file() and (path / "transformer" / "config.json").is_file():
        path = path / "transformer"  # a diffusers pipeline folder: the denoiser lives here
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} is not a diffusers model folder: config.json is missing")
    try:
        external = json_data.loads((path / "config.json").read_text())
    except json.JSONDecodeError as exc:  # Python's own names neither the file nor, in words, where
        from vfm_models.export import InvalidJSONError

        raise InvalidJSONError.of(exc, str(path / "config.json")) from None
    if not isinstance(external, dict):
        raise AdapterConfigError(f"{path / 'config.json'} is not a JSON object")
    return path, adapter or _adapter_for_class(external.get("_class_name"), external, path), external


def load_external(path: str | PathLike, adapter: str | StateDictAdapter | None = None,
                  config: Mapping[str, Any] | None = None) -> ExternalCheckpoint:
    """Read an external checkpoint from a local path.

    ``path``: a diffusers model folder (``config.json`` + ``diffusion_pytorch_model.safetensors`` or
    its sharded index; a pipeline folder is read from its ``transformer/``), or a single
    ``.safetensors`` / ``.pt`` / ``.pth`` file (``torch.load(weights_only=True)``).
    ``adapter``: its name or object; when None, from the folder's ``_class_name`` or by recognising the
    weights. ``config``: external config fields that override (or, for a bare file, complete) the ones
    read.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    if isinstance(adapter, str):
        adapter = get_adapter(adapter)
    if path.is_dir():
        path, adapter, external = read_folder_config(path, adapter)
        state = _folder_weights(path)
    else:
        state = _file_weights(path)
        adapter = adapter or _adapter_for_weights(state, path)
        try:
            external = adapter.config_from_state_dict(state)
        except AdapterConfigError:
            if not config:  # a format that needs config.json, and none was given
                raise
            external = {}
    if (cls := external.get("_class_name")) and adapter.diffusers_class and not adapter.accepts_class(cls, external):
        raise AdapterConfigError(f"{path} holds a {cls} but adapter {adapter.name!r} reads {adapter.diffusers_class}")
    external = {k: v for k, v in external.items() if not is_metadata_key(k)}
    external.update(config or {})
    return ExternalCheckpoint(adapter, external, state, path)


def save_diffusers_folder(folder: str | PathLike, state_dict: Mapping[str, torch.Tensor], config: Mapping[str, Any],
                          class_name: str) -> Path:
    """Write a diffusers model folder: ``config.json`` (with ``_class_name`` and ``_diffusers_version``)
    and ``diffusion_pytorch_model.safetensors``, loadable with ``<class_name>.from_pretrained(folder)``."""
    from vfm_plugins.files import fresh_file, replace_file

    from vfm_models.checkpoint import save_state_dict

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"_class_name": class_name, "_diffusers_version": DIFFUSERS_FORMAT_VERSION, **config},
                      indent=2, sort_keys=True)
    # Each file is written new (an unpredictable, exclusively created name) and renamed over the old
    # one: a link in the folder, at a file's name or a guessable temporary name, is never written through.
    with fresh_file(folder / DIFFUSERS_WEIGHTS) as tmp:
        save_state_dict(tmp, state_dict, {"format": "pt"})
    replace_file(folder / "config.json", text + "\n")
    return folder
