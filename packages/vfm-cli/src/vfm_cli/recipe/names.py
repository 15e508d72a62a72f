"""The config's names checked against the plugin registries (looked up without importing plugins)."""

from __future__ import annotations

import vfm_models
from vfm_parallel.trainer.config import ConfigError, TrainConfig
from vfm_plugins import unknown_options

_SINGULAR = {"families": "family", "formulations": "formulation", "tokenizers": "tokenizer", "text_encoders": "text encoder"}


def check_name(kind: str, name: str, key: str) -> None:
    """``name`` is registered as a ``kind`` (looked up without importing the plugin's module)."""
    names = vfm_models.host.names(kind)
    if name not in names:
        raise ConfigError(key, f"unknown {_SINGULAR[kind]} {name!r}; available: {', '.join(names)}")


def check_option_names(kind: str, name: str, options: dict, key: str) -> None:
    """Every key of ``options`` is a parameter of the ``kind`` plugin ``name`` (a class or factory
    taking ``**kwargs`` accepts any). A misspelt option would otherwise reach the run's export
    (tokenizers, text encoders) or fail only when the run builds it."""
    _refuse_unknown_options(f"{_SINGULAR[kind]} {name!r}", vfm_models.host.get(kind, name), options, key)


def _refuse_unknown_options(what: str, factory, options: dict, key: str) -> None:
    """A ConfigError at ``key.<option>`` for the first option ``factory`` does not take, listing those it does."""
    unknown, accepted = unknown_options(factory, options)
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}", f"unknown option of {what}; accepted: {', '.join(accepted) or '(none)'}")


def check_blender(cfg: TrainConfig) -> None:
    """``data.blender`` is a registered vfm-data blender and ``data.blender_options`` are options it takes,
    with values it accepts (it is built once here, as the run builds it). Checked whatever
    ``data.source``: synthetic data uses no blender, but a name it does not know is a typo that the
    same config on shards would meet only then."""
    d = cfg.data
    if not (d.blender or d.blender_options):
        return
    from vfm_data.blenders import groups_batches
    from vfm_data.plugins import host

    from vfm_cli.recipe.loaders import blender_of

    name, options = blender_of(d)
    if name not in host.names("blenders"):
        raise ConfigError("data.blender", f"unknown blender {name!r}; available: {', '.join(host.names('blenders'))}")
    target = host.get("blenders", name)
    _refuse_unknown_options(f"blender {name!r}", target, dict(d.blender_options), "data.blender_options")
    if d.packing and groups_batches(target):  # else vfm-data's ValueError, a traceback from inside the run
        raise ConfigError("data.blender", f"blender {name!r} stacks the samples of one bucket per batch and does not "
                                          "pack: with data.packing = true use weighted, scheduled or another packing "
                                          "blender, or set data.packing = false")
    try:  # built as the run builds it: a bad value (a schedule that is no list of pairs) named here
        host.build("blenders", name, options)
    except (TypeError, ValueError) as exc:
        raise ConfigError("data.blender_options", _refusal(f"blender {name!r}", dict(d.blender_options), exc)) from None


def check_formulation_options(cfg: TrainConfig) -> None:
    """``model.formulation_options`` are options the formulation takes, with values it accepts
    (it is built once here, which costs nothing: a formulation holds a few numbers)."""
    name, options = cfg.model.formulation, dict(cfg.model.formulation_options)
    check_option_names("formulations", name, options, "model.formulation_options")
    try:  # build: a plugin's instance registered in place of its class is named as such
        vfm_models.host.build("formulations", name, options)
    except (TypeError, ValueError) as exc:
        raise ConfigError("model.formulation_options", _refusal(f"formulation {name!r}", options, exc)) from None


def _refusal(what: str, options: dict, exc: Exception) -> str:
    """Why ``what`` refused ``options``: the host's own message already names the plugin and the
    option (a missing or unknown one), so it is not prefixed a second time."""
    from vfm_plugins import PluginOptionError

    return str(exc) if isinstance(exc, PluginOptionError) else f"{what} refuses {options}: {exc}"
