"""``model.init_from``: a run that starts from a checkpoint's weights (fine-tuning a public model).

The checkpoint is a vfm export, or anything ``vfm convert`` reads (a local diffusers model folder, a
facebookresearch/DiT ``.pt``), converted in memory. Its family and formulation must be the config's;
its model options are the defaults that ``model.options`` overrides; its weights must fit the model
built from the config key for key and shape for shape, checked before any process group starts.
"""

from __future__ import annotations

from typing import Any

import torch
from vfm_plugins.text import exception_text as exc_text

from vfm_parallel.trainer.config import ConfigError, TrainConfig

KEY = "model.init_from"


def _error(exc: Exception) -> ConfigError:
    return ConfigError(KEY, exc_text(exc))


def init_options(cfg: TrainConfig) -> dict[str, Any]:
    """The checkpoint's model options (the defaults under ``model.options``), after checking that its
    family and formulation are the config's."""
    from vfm_models.adapters.exports import source_meta

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
    from vfm_models.adapters.exports import source_shapes

    with torch.device("meta"):
        model = vfm_models.get_family(cfg.model.family).build(mcfg)
    try:
        check_keys(model.state_dict(), source_shapes(cfg.model.init_from), f"the checkpoint {cfg.model.init_from}")
    except (AdapterKeyError, OSError, ValueError) as exc:
        raise _error(exc) from None


def load_init(model: torch.nn.Module, cfg: TrainConfig) -> torch.nn.Module:
    """Copy the checkpoint's weights into ``model`` (every key, every shape)."""
    from vfm_models.adapters.exports import source_weights
    from vfm_models.checkpoint import load_into

    return load_into(model, source_weights(cfg.model.init_from))
