"""The config resolved: :func:`resolve` gives the family's config with what the shards decide filled
in (channels, text width, tokenizer and text encoder), checking the data against the model."""

from __future__ import annotations

import dataclasses
import os
import warnings
from dataclasses import dataclass
from typing import Any

import vfm_models
from vfm_plugins import Notice
from vfm_plugins.text import exception_text as exc_text
from vfm_parallel.trainer.config import ConfigError, TrainConfig

from vfm_cli.recipe.names import check_name
from vfm_cli.recipe.shards import ShardInfo, probe_shards, recorded_options


@dataclass
class Resolved:
    """The config with everything the shards decide filled in."""

    mcfg: Any  # the family's config dataclass
    latent_shape: tuple[int, int, int, int]  # (C, T, H, W) of the training data (the first bucket)
    tokenizer: str
    tokenizer_options: dict
    text_encoder: str  # "" unless the model is text-conditional
    text_encoder_options: dict
    shards: ShardInfo | None = None


def _family_config(cfg: TrainConfig, options: dict) -> Any:
    family = vfm_models.get_family(cfg.model.family)
    if "patch" in options:
        options["patch"] = tuple(options["patch"])  # TOML has arrays, the dataclass wants a tuple
    try:
        return family.config(cfg.model.preset or None, **options)
    except (KeyError, TypeError, ValueError) as exc:
        key = "model.preset" if "preset" in str(exc) else "model.options"
        raise ConfigError(key, exc_text(exc)) from None


def _agree(key: str, configured: str, recorded: str, what: str) -> str:
    if configured and recorded and configured != recorded:
        raise ConfigError(key, f"{configured!r}, but the shards were made with the {what} {recorded!r}")
    return configured or recorded


def _same_settings(key: str, configured: dict, recorded: dict, factory: Any, what: str) -> None:
    """A tokenizer or text encoder the config names itself takes its options from the config alone
    (shards are data: their paths are not trusted), but the export records them for generation: each
    setting the shards were made with must be the config's too (either side may leave one at the
    default), or the export describes other latents than the model learns (pixel patch 1 for latents
    folded with patch 2: vfm generate could not decode them). Strings are left to the config: they are
    paths and names of files, which a config may place elsewhere."""
    from vfm_plugins.host import option_defaults

    defaults = option_defaults(factory)
    made, given = {**defaults, **recorded}, {**defaults, **configured}
    differing = [k for k in dict.fromkeys([*recorded, *configured]) if k in made and k in given
                 and not isinstance(made[k], str) and not isinstance(given[k], str) and made[k] != given[k]]
    if differing:
        ours = ", ".join(f"{k} = {given[k]!r}" for k in differing)
        theirs = ", ".join(f"{k} = {made[k]!r}" for k in differing)
        raise ConfigError(key, f"{ours}, but the shards were made with the {what} and {theirs}: the export would describe "
                               f"other latents than the model learns from them. Accepted: the shards' settings in "
                               f"{key}, or {key.rsplit('_', 1)[0]} = \"\" to take the shards' name and options")


class UnconditionalOnCaptionsNotice(Notice):
    """A class-conditional family trained on captioned shards: it trains unconditional, captions unused."""


def _note_unconditional_on_captions(cfg: TrainConfig, mcfg: Any) -> None:
    """Shards carry no class labels, so a class-conditional family's ``num_classes`` becomes 0 there: say so
    at the start, or the user learns it at ``vfm generate`` ("this model is unconditional") after the run.
    Not refused: an unconditional model on captioned shards is a fair choice, which ``num_classes = 0``
    written out makes without this note."""
    if mcfg.text_dim or not mcfg.num_classes:
        return  # a text model uses the captions; an unconditional one asked for nothing else
    if int(os.environ.get("RANK", "0")) != 0:
        return  # every rank resolves the same config: one line per job
    warnings.warn(
        f"model.family {cfg.model.family!r} is class-conditional (num_classes {mcfg.num_classes}), but the shards carry "
        f"captions and no class labels: the model trains unconditional and ignores the captions; for a text-conditional "
        f"model choose a text family (e.g. model.family = \"dit-cross\"), or set model.options.num_classes = 0 to train "
        f"unconditional without this note", UnconditionalOnCaptionsNotice, stacklevel=3)


def resolve(cfg: TrainConfig, *, probe: bool = True) -> Resolved:
    """The family config and the export's names; checks the data against the model.

    ``probe=False`` (validating a config away from its data) takes ``data.latent_shape`` and the
    model section as they are, without reading shards.
    """
    check_name("families", cfg.model.family, "model.family")
    m, options = cfg.model, dict(cfg.model.options)
    if m.init_from:  # the checkpoint's options are the defaults that model.options overrides
        from vfm_cli.recipe.init_from import init_options

        options = {**init_options(cfg), **options}
    fields = {f.name for f in dataclasses.fields(vfm_models.get_family(m.family).config_cls)}
    if cfg.data.source == "shards" and not probe:
        options.setdefault("in_channels", cfg.data.latent_shape[0])
        mcfg = _family_config(cfg, options)
        return Resolved(mcfg, tuple(cfg.data.latent_shape), m.tokenizer, dict(m.tokenizer_options),
                        m.text_encoder if mcfg.text_dim else "", dict(m.text_encoder_options))
    if cfg.data.source == "synthetic":
        options.setdefault("in_channels", cfg.data.latent_shape[0])
        if "num_classes" in fields:
            options.setdefault("num_classes", cfg.data.num_classes)
        mcfg = _family_config(cfg, options)
        if mcfg.text_dim:
            raise ConfigError("data.source", "synthetic data is class-conditional; text-conditional families need shards")
        return Resolved(mcfg, tuple(cfg.data.latent_shape), m.tokenizer or "pixel", dict(m.tokenizer_options), "", {})
    info = probe_shards(cfg)
    channels = info.shapes[0][0]
    if options.setdefault("in_channels", channels) != channels:
        raise ConfigError("model.options.in_channels", f"the model takes {options['in_channels']} channels but the shards' latents have {channels}")
    if options.get("num_classes", 0):
        raise ConfigError("model.options.num_classes", "shards carry no class labels; train text-conditional or unconditional (num_classes = 0)")
    if "num_classes" in fields:
        if "num_classes" not in options and info.captioned:
            _note_unconditional_on_captions(cfg, _family_config(cfg, dict(options)))
        options["num_classes"] = 0
    text_model = _family_config(cfg, dict(options)).text_dim > 0
    if text_model and options.setdefault("text_dim", info.text_dim) != info.text_dim:
        raise ConfigError("model.options.text_dim", f"the model's text_dim is {options['text_dim']} but the shards' text embeddings "
                          f"({info.text_encoder or 'unknown encoder'}) are {info.text_dim} wide; they must be equal")
    mcfg = _family_config(cfg, options)
    tokenizer = _agree("model.tokenizer", m.tokenizer, info.tokenizer, "tokenizer")
    # options the shards record are data: paths only inside the dataset folder (recorded_options)
    tok_options = dict(m.tokenizer_options) if m.tokenizer else recorded_options(info, "tokenizer_options")
    if m.tokenizer and info.tokenizer_options:
        _same_settings("model.tokenizer_options", tok_options, info.tokenizer_options,
                       vfm_models.get_tokenizer(tokenizer), f"tokenizer {tokenizer!r}")
    text_encoder, te_options = "", {}
    if text_model:
        text_encoder = _agree("model.text_encoder", m.text_encoder, info.text_encoder, "text encoder")
        te_options = dict(m.text_encoder_options) if m.text_encoder else recorded_options(info, "text_encoder_options")
        if m.text_encoder and info.text_encoder_options:
            _same_settings("model.text_encoder_options", te_options, info.text_encoder_options,
                           vfm_models.get_text_encoder(text_encoder), f"text encoder {text_encoder!r}")
    return Resolved(mcfg, info.shapes[0], tokenizer, tok_options, text_encoder, te_options, info)


def grid_of(latent_shape: tuple[int, ...], mcfg: Any) -> tuple[int, int, int]:
    """Patch tokens along (T, H, W) of a latent of ``latent_shape``."""
    _, t, h, w = latent_shape
    pt, ph, pw = mcfg.patch
    return t // pt, h // ph, w // pw


def seq_len(cfg: TrainConfig, r: Resolved) -> int:
    """Tokens of one model input: a pack when packing, else a sample of the first bucket."""
    if cfg.data.packing:
        return cfg.data.max_seq_len
    t, h, w = grid_of(r.latent_shape, r.mcfg)
    return t * h * w
