"""``model.init_from``: a run that starts from a checkpoint's weights (fine-tuning a public model).

The checkpoint is a vfm export, a training checkpoint (``RUN/checkpoints/step_<N>``: its export, the
EMA weights when the run had EMA, read as ``vfm export`` reads them, after the checkpoint is verified
whole), or anything ``vfm convert`` reads (a local diffusers model folder, a facebookresearch/DiT ``.pt``),
converted in memory. Its family and formulation must be the config's;
its model options are the defaults that ``model.options`` overrides; its weights must fit the model
built from the config key for key and shape for shape, and every option but a runtime one must be the
checkpoint's (a head count or position embedding changed over the same shapes would load the weights
into a model that computes something else), checked before any process group starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from vfm_plugins.text import exception_text as exc_text

from vfm_parallel.trainer.config import ConfigError, TrainConfig

KEY = "model.init_from"
#: Model options that choose how the same maths runs, not what the weights mean: a run may change them.
RUNTIME_OPTIONS = ("attention_backend",)


def _error(exc: Exception) -> ConfigError:
    return ConfigError(KEY, exc_text(exc))


# --- the checkpoint, read once ----------------------------------------------------------------------
# A checkpoint that is no vfm export (a bare DiT .pt, a diffusers folder) has no meta, shapes or
# weights on disk: each is a conversion of the whole file, seconds and memory for a large model.
# Validation wants its meta (twice) and shapes, the run its weights: one conversion serves them all.

_CONVERTED: dict[tuple, tuple[dict[str, Any], dict[str, torch.Tensor]]] = {}  # one entry: the latest file


def _converts(path: Path) -> bool:
    """Whether the checkpoint's shapes and weights are a conversion (a bare file, a diffusers folder): a
    vfm export's are read from disk, a training checkpoint's from its tensors, and a missing path is left
    to vfm_models to name."""
    from vfm_models.adapters.exports import is_vfm_export

    return path.exists() and not is_vfm_export(path) and not _is_training_checkpoint(path)


# --- a training checkpoint ------------------------------------------------------------------------
# Its settings and shapes come from its state.json and tensor headers (cheap, read while the config is
# validated, in every process); its weights from read_checkpoint, which first verifies every file
# against the manifest (collectively under torchrun: the files are hashed once between the ranks).

def _is_training_checkpoint(path: Path) -> bool:
    from vfm_cli.checkpoint_export import looks_like_checkpoint

    return looks_like_checkpoint(path)


def _checkpoint_meta(path: Path) -> dict[str, Any]:
    """The export settings a training checkpoint records (refused, one line, when it is not committed,
    its state does not read, or it records none)."""
    from vfm_parallel import checkpoint as ckpt

    from vfm_cli.checkpoint_export import recorded_meta

    return recorded_meta(path, ckpt.read_state(path))


def _checkpoint_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """The shapes of the weights a training checkpoint exports (EMA's when the run had EMA)."""
    from vfm_cli.checkpoint_export import exported_part

    return exported_part(path)[1]


def _checkpoint_weights(path: Path) -> dict[str, torch.Tensor]:
    from vfm_cli.checkpoint_export import read_checkpoint

    return read_checkpoint(path).model.state_dict()


def _conversion(path: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(export meta, vfm state dict) of an external checkpoint, converted once per file and process
    (keyed by its size and time too: a file replaced at the same path is converted again)."""
    from vfm_models.adapters.exports import converted

    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _CONVERTED:
        _CONVERTED.clear()  # one checkpoint at a time: never two models' weights held
        _CONVERTED[key] = converted(path)
    return _CONVERTED[key]


def source_meta(path: str) -> dict[str, Any]:
    """The checkpoint's export meta: a vfm export's or a diffusers folder's from its config files, a
    bare weights file's from its conversion."""
    from vfm_models.adapters.exports import source_meta as read_meta

    p = Path(path)
    if p.is_file():
        return _conversion(p)[0]
    if _is_training_checkpoint(p):
        return _checkpoint_meta(p)
    if p.is_dir() and not (p / "config.json").is_file() and not (p / "transformer" / "config.json").is_file():
        from vfm_cli.checkpoint_export import run_checkpoints_hint

        raise FileNotFoundError(f"{p} is no checkpoint to start from; accepted: a vfm export (config.json and "
                                "model.safetensors), a training checkpoint (RUN/checkpoints/step_<N>), a diffusers "
                                f"model folder or a DiT .pt file{run_checkpoints_hint(p)}")
    return read_meta(p)


def source_shapes(path: str) -> dict[str, tuple[int, ...]]:
    """The checkpoint's vfm tensor names and shapes (a vfm export's from its safetensors header)."""
    from vfm_models.adapters.exports import source_shapes as read_shapes

    p = Path(path)
    if _is_training_checkpoint(p):
        return _checkpoint_shapes(p)
    if not _converts(p):
        return read_shapes(p)
    return {k: tuple(v.shape) for k, v in _conversion(p)[1].items()}


def source_weights(path: str) -> dict[str, torch.Tensor]:
    """The checkpoint's vfm state dict; a conversion is dropped here: the model holds the weights now."""
    from vfm_models.adapters.exports import source_weights as read_weights

    p = Path(path)
    if _is_training_checkpoint(p):
        return _checkpoint_weights(p)
    if not _converts(p):
        return read_weights(p)
    state = _conversion(p)[1]
    _CONVERTED.clear()
    return state


def init_options(cfg: TrainConfig) -> dict[str, Any]:
    """The checkpoint's model options (the defaults under ``model.options``), after checking that its
    family and formulation are the config's."""
    try:
        meta = source_meta(cfg.model.init_from)
    except (OSError, ValueError, KeyError) as exc:
        raise _error(exc) from None
    if meta["family"] != cfg.model.family:
        raise ConfigError("model.family", f"{cfg.model.family!r}, but {KEY} = {cfg.model.init_from!r} holds a "
                          f"{meta['family']!r} model; set model.family = {meta['family']!r}")
    trained = meta.get("formulation")
    if trained and trained != cfg.model.formulation:
        raise ConfigError("model.formulation", f"{cfg.model.formulation!r}, but {KEY} = {cfg.model.init_from!r} was "
                          f"trained with {trained!r}; set model.formulation = {trained!r} to fine-tune it")
    return dict(meta["config"])


def check_init(cfg: TrainConfig, mcfg: Any) -> None:
    """Refuse a checkpoint whose weights do not fit the model of ``mcfg``, naming the keys that differ."""
    import vfm_models
    from vfm_models.adapters import AdapterKeyError, check_keys

    with torch.device("meta"):
        model = vfm_models.get_family(cfg.model.family).build(mcfg)
    try:
        check_keys(model.state_dict(), source_shapes(cfg.model.init_from), f"the checkpoint {cfg.model.init_from}")
    except (AdapterKeyError, OSError, ValueError) as exc:
        raise _error(exc) from None
    _check_same_meaning(cfg, mcfg)


def _check_same_meaning(cfg: TrainConfig, mcfg: Any) -> None:
    """Refuse an option that differs from the checkpoint's although every shape fits (the head count
    over the same width, the position embedding, qk-norm, the timestep features...): naming the
    option, the checkpoint's value and how to start fresh instead. No opt-in: such a run is a new model."""
    import dataclasses

    import vfm_models

    saved_options = init_options(cfg)
    if "patch" in saved_options:
        saved_options["patch"] = tuple(saved_options["patch"])
    try:
        saved = vfm_models.get_family(cfg.model.family).config(None, **saved_options)
    except (KeyError, TypeError, ValueError) as exc:
        raise _error(exc) from None
    changed = [f.name for f in dataclasses.fields(mcfg) if f.name not in RUNTIME_OPTIONS
               and getattr(mcfg, f.name) != getattr(saved, f.name)]
    if not changed:
        return
    first = changed[0]
    where = "model.preset" if first not in cfg.model.options and cfg.model.preset else f"model.options.{first}"
    what = ", ".join(f"{name} = {getattr(mcfg, name)!r} where the checkpoint has {getattr(saved, name)!r}" for name in changed)
    raise ConfigError(where, f"{what}: {KEY} = {cfg.model.init_from!r} would load (its tensors have the same shapes) "
                             f"but compute something else. Leave {'these options' if len(changed) > 1 else 'it'} out "
                             f"of model.options (the checkpoint's values are the defaults), or remove {KEY} to train "
                             f"a new model from scratch")


def load_init(model: torch.nn.Module, cfg: TrainConfig) -> torch.nn.Module:
    """Copy the checkpoint's weights into ``model`` (every key, every shape)."""
    from vfm_models.checkpoint import load_into

    return load_into(model, source_weights(cfg.model.init_from))
