"""The inference export (docs/contracts.md section 3): ``model.safetensors`` + ``config.json``.

``config.json`` names the family and its config, the formulation, tokenizer and text encoder with
their options, the training latent shape, and the null condition with the condition dropout and
default guidance scale it was trained for, so that ``load_export`` can rebuild everything by name.
Loading never unpickles: JSON and safetensors only.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from os import PathLike
from pathlib import Path
from typing import Any, Iterable, Mapping

import torch
from torch import nn

from vfm_models.checkpoint import (CheckpointMismatchError, check_stored_archive, check_whole, differences, load_state_dict,
                                   mismatch, save_state_dict)
from vfm_models.export_paths import check_export_paths
from vfm_plugins import Notice, json_data
from vfm_plugins.files import fresh_file
from vfm_plugins.formats import check_format_version, ignore_unknown_keys

WEIGHTS = "model.safetensors"
CONFIG = "config.json"
#: ``config.json``'s ``format_version``: bumped when an older vfm would misread an export (a key renamed or
#: given another meaning), not for a key an older vfm may ignore. An export without it (written before the
#: field) is format 1.
EXPORT_FORMAT = 1
REQUIRED = ("family", "config")
OPTIONAL = (
    "formulation",
    "formulation_options",
    "tokenizer",
    "tokenizer_options",
    "text_encoder",
    "text_encoder_options",
    "latent_shape",
    "latent_shapes",  # every latent shape the model trained on (one per bucket); latent_shape is the default of them
    "null_condition",  # vfm_models.conditioning.describe: what condition dropout trained and guidance contrasts against
    "cond_dropout",  # the training's condition-dropout probability (0: the null was never trained)
    "guidance",  # the default classifier-free guidance scale (1 = off)
    "source",  # {"step": N, "ema": bool} when written from a training checkpoint (vfm export CHECKPOINT): its step, and
    # whether the weights are the EMA ones (true) or the model's own (a run without EMA)
    "converted_from",  # {"adapter": name} when written by vfm convert (vfm_models.adapters.exports)
)


def _plain(value: Any) -> Any:
    """A dataclass config (or anything holding one) as JSON-ready dicts and lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    return value


def _tuples(value: Any) -> Any:
    """JSON lists back to tuples: config dataclasses hold tuples (hashable, frozen-friendly)."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    return value


def _is_shape(shape: Any) -> bool:
    return (isinstance(shape, (list, tuple)) and len(shape) == 4
            and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape))


def _check_meta(meta: Mapping[str, Any], where: str) -> None:
    missing = [k for k in REQUIRED if k not in meta]
    if missing:
        raise ValueError(f"{where} lacks {', '.join(missing)}; an export needs {', '.join(REQUIRED)} (optional: {', '.join(OPTIONAL)})")
    shape = meta.get("latent_shape")
    if shape is not None and not _is_shape(shape):
        raise ValueError(f"{where}: latent_shape must be [C, T, H, W] of positive ints, got {shape!r}")
    shapes = meta.get("latent_shapes")
    if shapes is not None and (not isinstance(shapes, (list, tuple)) or not shapes or not all(map(_is_shape, shapes))):
        raise ValueError(f"{where}: latent_shapes must be a non-empty list of [C, T, H, W] of positive ints, got {shapes!r}")
    for key, low, high in (("guidance", -1e4, 1e4), ("cond_dropout", 0.0, 1.0)):
        value = meta.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not low <= value <= high):
            raise ValueError(f"{where}: {key} must be a number in [{low:g}, {high:g}], got {value!r}")


class NonFiniteWeightsError(ValueError):
    """Weights holding inf or nan: never written as an export, nor generated from (a black video)."""


def check_finite(state: Mapping[str, torch.Tensor], where: str) -> None:
    """Raise :class:`NonFiniteWeightsError` naming the tensors of ``state`` with inf or nan values."""
    bad = [name for name, t in state.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    if bad:
        shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        raise NonFiniteWeightsError(f"{where}: {len(bad)} of {len(state)} weight tensors hold inf or nan values ({shown}); "
                                    "the training diverged: use an earlier checkpoint or a lower learning rate")


def plain_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """``meta`` checked and as JSON-ready dicts and lists (its config dataclass as a dict): what
    ``config.json`` holds, less ``vfm_models_version``. A training run records it in each checkpoint,
    so that a checkpoint alone can be exported (``vfm export CHECKPOINT``)."""
    _check_meta(meta, "export meta")
    return _plain(dict(meta))


def unwrapped(model: nn.Module) -> nn.Module:
    """The model inside DDP's and ``torch.compile``'s wrappers: their state dicts prefix every name
    (``module.``, ``_orig_mod.``), which the family that load_export rebuilds does not have."""
    from torch.nn.parallel import DistributedDataParallel

    # torch.compile's wrapper class, when torch.compile has been imported (else no model is one)
    dynamo = sys.modules.get("torch._dynamo.eval_frame")
    compiled = getattr(dynamo, "OptimizedModule", ())
    while True:
        if isinstance(model, DistributedDataParallel):
            model = model.module
        elif isinstance(model, compiled):
            model = model._orig_mod
        else:
            return model


def save_export(folder: str | PathLike, model: nn.Module | Mapping[str, torch.Tensor], meta: Mapping[str, Any], *,
                for_generation: bool = True) -> Path:
    """Write ``model`` (the EMA weights, or their state dict) and ``meta`` to ``folder``.

    ``meta["config"]`` may be the family's config dataclass or a dict of its fields.
    ``vfm_models_version`` is filled in. A model wrapped by DDP or ``torch.compile`` is exported
    under its own names (:func:`unwrapped`). Returns the folder. Weights with inf or nan values are
    refused (:class:`NonFiniteWeightsError`) before anything is written, and so are DTensors (a model
    under FSDP or TP: :class:`~vfm_models.checkpoint.ShardedWeightsError`, which says how to gather them).

    ``meta`` must be able to generate with its model (:mod:`vfm_models.export_generation`: a registered
    family, formulation, tokenizer and text encoder with options they take, latent channels and text
    width that are the model's, a latent shape of its patch): else an
    :class:`~vfm_models.export_generation.ExportGenerationError` names every problem, and nothing is
    written. ``for_generation=False`` writes a weights-only export (``vfm convert`` without a tokenizer),
    which may lack the formulation, tokenizer, latent shape or text encoder; what it names is still checked.
    """
    import vfm_models
    from vfm_models import __version__
    from vfm_models.export_generation import check_export_meta

    _check_meta(meta, "export meta")
    config = check_export_meta(meta, f"refusing to export to {folder}", for_generation=for_generation)
    state = unwrapped(model).state_dict() if isinstance(model, nn.Module) else model
    check_whole(state, f"refusing to export to {folder}")
    check_finite(state, f"refusing to export to {folder}")
    # as load_export will check them (a block compiled on its own writes blocks.0._orig_mod.: refused only then)
    check_fits_weights(vfm_models.get_family(meta["family"]), config, state,
                       f"family {meta['family']!r} with its config, so nothing is written to {folder}")
    plain = _plain(dict(meta))
    plain["vfm_models_version"] = __version__
    plain["format_version"] = EXPORT_FORMAT  # this writer's, also where meta came from an older export's config.json
    try:
        text = json.dumps(plain, indent=2, sort_keys=True)
    except TypeError as exc:
        raise TypeError(f"export meta must be JSON-serialisable (numbers, strings, lists, dicts): {exc}") from None
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    # Each file is written new and renamed over the old one: a reader never sees half a file, and a
    # file there that is a link (a run folder from elsewhere, resumed) is replaced, never written through.
    with fresh_file(folder / WEIGHTS) as tmp:
        save_state_dict(tmp, state, {"format": "vfm-export", "family": str(meta["family"])})
    with fresh_file(folder / CONFIG) as tmp:
        tmp.write_text(text + "\n")
    return folder


def read_meta(folder: str | PathLike) -> dict[str, Any]:
    """The ``config.json`` of an export, read strictly (:func:`strict_json`): it is data from elsewhere."""
    path = Path(folder) / CONFIG
    if not path.is_file():
        raise FileNotFoundError(f"{folder} is not a vfm export: {CONFIG} is missing (expected {CONFIG} and {WEIGHTS})")
    meta = strict_json(own_file(folder, CONFIG).read_text(), str(path))
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: expected a JSON object (family, config, ...), got {type(meta).__name__}")
    # the version first: a newer export's keys may mean something else, so it is refused before they are read
    check_format_version(meta.get("format_version"), where=str(path), what="vfm export", current=EXPORT_FORMAT,
                         package="vfm-models", missing=1, writer=_writer(meta))
    _check_meta(meta, str(path))
    ignore_unknown_keys(meta, (*REQUIRED, *OPTIONAL, "vfm_models_version", "format_version"), where=str(path),
                        what="vfm export", stacklevel=3)
    return meta


def _writer(meta: Mapping[str, Any]) -> str:
    version = meta.get("vfm_models_version")
    return f"vfm-models {version}" if isinstance(version, str) else ""


class InvalidJSONError(json.JSONDecodeError):
    """A JSON file that does not parse, named first with the position in words: ``<where> is not valid
    JSON: <why> at line L, column C (char P)`` (Python's own error names neither the file nor, in that
    order, a place to look). Still a ``json.JSONDecodeError`` for callers that catch that."""

    def __init__(self, msg: str, doc: str, pos: int, where: str) -> None:
        super().__init__(msg, doc, pos)
        self.where = where
        self.args = (f"{where} is not valid JSON: {msg} at line {self.lineno}, column {self.colno} (char {pos})",)

    def __reduce__(self):  # JSONDecodeError's own drops ``where``
        return type(self), (self.msg, self.doc, self.pos, self.where)

    @classmethod
    def of(cls, exc: json.JSONDecodeError, where: str) -> "InvalidJSONError":
        return cls(exc.msg, exc.doc, exc.pos, where)


def strict_json(text: str, where: str) -> Any:
    """JSON as a file from elsewhere must be read: a key twice in one object (one reader sees the first
    value, Python's ``json`` the last), ``NaN`` / ``Infinity`` (not JSON) or a number that overflows to
    inf (``1e999``) is refused with a ``ValueError`` naming ``where`` and the key or value; text that
    does not parse is :class:`InvalidJSONError` naming ``where`` and the position."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ValueError(f"{where}: key {key!r} appears twice in one object; accepted: each key once")
            out[key] = value
        return out

    def number(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(f"{where}: the number {text} is not finite; accepted: finite numbers")
        return value

    def constant(name: str) -> Any:
        raise ValueError(f"{where}: {name} is not a JSON number; accepted: finite numbers")

    try:
        return json_data.loads(text, object_pairs_hook=pairs, parse_float=number, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise InvalidJSONError.of(exc, where) from None


def own_file(folder: str | PathLike, name: str) -> Path:
    """``folder/name``, refused (``ExportPathError``) when it is a symbolic link leading out of ``folder``
    (an export is data: its files are its own, not a link to another of this machine's files)."""
    from vfm_models.export_paths import ExportPathError

    path = Path(folder) / name
    if path.is_symlink() and not path.resolve().is_relative_to(Path(folder).resolve()):
        raise ExportPathError(f"{path} is a symbolic link to {path.resolve()}, outside the export folder; accepted: "
                              f"the export's own {name} (copy the file in)")
    # a named pipe: safetensors opened it and waited for a writer forever, in Rust code no Ctrl-C reaches
    if path.exists() and not path.is_file():
        raise ExportPathError(f"{path} is not a regular file (a named pipe, a device or a folder); accepted: the "
                              f"export's own {name} as save_export writes it")
    return path


class _TooManyTensors(Exception):
    pass


def weight_shapes(path: str | PathLike) -> dict[str, tuple[int, ...]]:
    """{name: shape} from a safetensors header, reading no tensor data."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}


def build_on_meta(build: Any, tensors: int, what: str) -> nn.Module:
    """``build()`` on the meta device (no memory), stopped with :class:`CheckpointMismatchError`
    (``what``: the message's start) once it registers far more tensors than the ``tensors`` its
    weights hold (``depth: 100000`` would otherwise make 100000 blocks of Python objects)."""
    from torch.nn.modules import module as nn_module

    limit = 2 * tensors + 256  # re-registrations and non-persistent buffers have room
    count = 0

    def counted(*_: Any) -> None:
        nonlocal count
        count += 1
        if count > limit:
            raise _TooManyTensors

    hooks = [nn_module.register_module_parameter_registration_hook(counted),
             nn_module.register_module_buffer_registration_hook(counted)]
    try:
        with torch.device("meta"):
            return build()
    except _TooManyTensors:
        raise CheckpointMismatchError(f"{what}: the config builds a model with more than {limit} tensors, the weights "
                                      f"hold {tensors}") from None
    finally:
        for hook in hooks:
            hook.remove()


def check_folder_fits(build: Any, folder: Path, what: str) -> None:
    """Refuse a model folder (diffusers, transformers) whose ``config.json`` describes more values than
    its weight files hold, before the library builds it: ``build()`` runs on the meta device first
    (:func:`build_on_meta`). Names may differ (libraries rename old keys on load), sizes may not.
    Weights are read by header only (safetensors; ``.bin`` with ``weights_only`` onto the meta device)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for file in sorted(folder.glob("*.safetensors")):
        shapes.update(weight_shapes(file))
    if not shapes:
        for file in sorted(folder.glob("*.bin")):
            check_stored_archive(file)  # the library would inflate a deflated record
            state = torch.load(file, map_location="meta", weights_only=True)
            shapes.update({k: tuple(v.shape) for k, v in state.items() if isinstance(v, torch.Tensor)})
    stored = sum(math.prod(s) for s in shapes.values())
    about = f"{what}: {folder / CONFIG} does not fit its weights"
    skeleton = build_on_meta(build, len(shapes), about)
    # parameters() counts a tied weight once, as the files store it
    values = sum(t.numel() for t in skeleton.parameters()) + sum(t.numel() for t in skeleton.buffers())
    if values > stored + (stored >> 4) + (1 << 20):
        raise CheckpointMismatchError(f"{about}: it describes a model of {values} values, the weight files hold {stored}")


def check_fits_weights(family: Any, config: Any, weights: str | PathLike | Mapping[str, Any], what: str) -> None:
    """Refuse, before any memory is allocated, a config whose model does not fit ``weights`` (a
    safetensors file, read by header only, or {name: tensor or shape}): the model is first built on
    the meta device, and a build registering far more tensors than the weights hold is stopped
    early. A config is data: ``depth: 100000`` or ``hidden: 10**6`` must not allocate what the
    weights do not hold (it took all memory, then failed the shape check). Raises
    :class:`CheckpointMismatchError` naming the differences."""
    in_file = isinstance(weights, (str, PathLike))
    shapes = weight_shapes(weights) if in_file else dict(weights)
    named = f"the weights in {weights}" if in_file else "the weights"
    try:
        check_build_fits(lambda: family.build(config), shapes, f"{named} do not fit {what}")
    except CheckpointMismatchError:
        raise
    except Exception as exc:  # a plugin family whose build needs real tensors: checked after its build instead
        import warnings

        warnings.warn(f"{what}: the model cannot be built on the meta device ({type(exc).__name__}: {exc}), so its "
                      "config is checked against the weights only once it is built", Notice, stacklevel=2)


def check_build_fits(build: Any, shapes: Mapping[str, Any], about: str) -> nn.Module:
    """``build()`` on the meta device (:func:`build_on_meta`), its state dict compared with ``shapes``
    ({name: tensor or shape}): a :class:`CheckpointMismatchError` starting with ``about`` names the
    differences. Returns the meta-device model."""
    skeleton = build_on_meta(build, len(shapes), about)
    own = skeleton.state_dict()
    if any(differences(own, shapes)):
        raise CheckpointMismatchError(f"{about}:\n{mismatch(own, shapes)}")
    return skeleton


def load_export(folder: str | PathLike, device: str | torch.device = "cpu", dtype: torch.dtype | None = None, *,
                weights_roots: Iterable[str | PathLike] = ()) -> tuple[nn.Module, dict[str, Any]]:
    """Rebuild the model of an export by family name and load its weights -> (model in eval mode, meta).

    Before anything is built, every path in ``config.json`` must resolve inside the export folder or
    one of ``weights_roots`` (:mod:`vfm_models.export_paths`, raising ``ExportPathError`` naming the
    key and the path); the returned meta holds them as absolute paths.

    Weights that do not fit the config raise :class:`~vfm_models.checkpoint.CheckpointMismatchError`
    naming the missing and unexpected keys and the differing shapes.
    """
    import vfm_models

    meta = check_export_paths(folder, read_meta(folder), weights_roots)
    weights = own_file(folder, WEIGHTS)
    family = vfm_models.get_family(meta["family"])
    config = family.config(**_tuples(meta["config"]))
    check_fits_weights(family, config, weights, f"family {meta['family']!r} with the config in {CONFIG}")
    model = family.build(config)
    state = load_state_dict(weights)
    own = model.state_dict()
    missing, unexpected, shapes = differences(own, state)
    if missing or unexpected or shapes:
        raise CheckpointMismatchError(
            f"the weights in {Path(folder) / WEIGHTS} do not fit family {meta['family']!r} with the config in "
            f"{CONFIG}:\n{mismatch(own, state)}"
        )
    model.load_state_dict(state)
    model = model.to(device=device, dtype=dtype) if dtype is not None else model.to(device)
    return model.eval(), meta
