"""What an inference export needs to generate, checked against its model's config when it is written
(:func:`vfm_models.export.save_export`) rather than days later at ``vfm generate``, and the wording
``vfm_infer.VideoPipeline`` uses for the same faults (so both say it alike).

Cheap by design: names are looked up in the registries, options checked against their factories'
signatures, the formulation (a few numbers) built; a tokenizer's latent channels and a text encoder's
width come from what the component declares without being built (``declared_latent_channels(options)`` /
``declared_width(options)``, ``options`` with its defaults filled in; a component that declares
nothing is checked when it is built, at generation). No weights are read.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

#: What generation cannot do without (``vfm_infer.VideoPipeline`` refuses an export lacking one).
GENERATION_KEYS = ("formulation", "tokenizer", "latent_shape")


class ExportGenerationError(ValueError):
    """Export metadata that cannot generate with its model, refused before anything is written."""


def missing_for_generation(meta: Mapping[str, Any]) -> list[str]:
    """The :data:`GENERATION_KEYS` that ``meta`` lacks (or leaves empty)."""
    return [k for k in GENERATION_KEYS if not meta.get(k)]


def lacks(missing: list[str]) -> str:
    """``lacks formulation, ...; generation needs ...``: how an export lacking keys is described."""
    return (f"lacks {', '.join(missing)}; generation needs the formulation, the tokenizer and the latent_shape of "
            "the training data")


def tokenizer_channels_problem(meta: Mapping[str, Any], made: int, in_channels: int) -> str:
    """The message for a tokenizer (named in ``meta``) that gives ``made`` latent channels to a model taking ``in_channels``."""
    return (f"the export's tokenizer {meta['tokenizer']!r} {dict(meta.get('tokenizer_options') or {})} gives {made} "
            f"latent channels but the model takes {in_channels}: its tokenizer_options are not those of the model's "
            "training data")


def _declared(factory: Any, method: str, options: Mapping[str, Any], what: str, name: str,
              problems: list[str]) -> int | None:
    """What ``factory.<method>`` declares for ``options`` (with defaults), or None when it declares nothing,
    or after noting that ``options`` are not values it takes (``--tokenizer-option patch=abc``: the
    declare's ``int('abc')`` was the whole error, naming neither the component nor the option)."""
    from vfm_plugins.host import option_defaults

    declare = getattr(factory, method, None)
    if not callable(declare):
        return None
    try:
        value = declare({**option_defaults(factory), **options})
    except (TypeError, ValueError) as exc:
        problems.append(f"{what} {name!r} cannot take its {what}_options {dict(options)!r}: {exc}")
        return None
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _component(kind: str, what: str, name: Any, options: Any, problems: list[str]) -> Any:
    """The factory registered as ``name`` of ``kind``, or None after noting why it cannot be built with ``options``."""
    import vfm_models
    from vfm_plugins import unknown_options
    from vfm_plugins.host import missing_options

    names = vfm_models.host.names(kind)
    if not isinstance(name, str) or name not in names:
        problems.append(f"{what} {name!r} is not registered; accepted: {', '.join(names)}")
        return None
    if options is not None and not isinstance(options, Mapping):
        problems.append(f"{what}_options must be a mapping of option names to values, got {options!r}")
        return None
    factory = vfm_models.host.get(kind, name)
    unknown, accepted = unknown_options(factory, dict(options or {}))
    if unknown:
        problems.append(f"{what} {name!r} has no option {', '.join(unknown)}; accepted: {', '.join(accepted) or '(none)'}")
        return None
    missing = missing_options(factory, dict(options or {}))
    if missing:
        problems.append(f"{what} {name!r} needs the option{'s' * (len(missing) > 1)} {', '.join(missing)} in "
                        f"{what}_options, not given")
        return None
    return factory


def family_config(meta: Mapping[str, Any], problems: list[str]) -> Any:
    """The family config ``meta`` describes (its ``config``, a dataclass or a dict of its fields), or None
    after noting why there is none (an unknown family, a field the family's config does not have)."""
    import vfm_models
    from vfm_models.export import _tuples

    name, config = meta.get("family"), meta.get("config")
    names = vfm_models.host.names("families")
    if not isinstance(name, str) or name not in names:
        problems.append(f"family {name!r} is not registered; accepted: {', '.join(names)}")
        return None
    family = vfm_models.get_family(name)
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return config
    if not isinstance(config, Mapping):
        problems.append(f"config must be the family's config dataclass or a dict of its fields, got {config!r}")
        return None
    try:  # as load_export rebuilds it: JSON lists are the config's tuples
        return family.config(**_tuples(dict(config)))
    except (TypeError, ValueError) as exc:
        problems.append(f"config does not make a {name!r} config: {exc}")
        return None


def generation_problems(meta: Mapping[str, Any], config: Any, *, for_generation: bool = True) -> list[str]:
    """Every reason ``meta`` cannot generate with a model of ``config`` (the family config), each naming
    what is accepted. ``for_generation=False`` (a weights-only export): a key generation needs may be
    absent, but what is named is still checked."""
    import vfm_models
    from vfm_models.conditioning import kind_of, null_condition_problem

    problems: list[str] = []
    missing = missing_for_generation(meta)
    if missing and for_generation:
        problems.append(lacks(missing) + " (a weights-only export is written with for_generation=False)")
    in_channels = getattr(config, "in_channels", None)
    if meta.get("formulation"):
        factory = _component("formulations", "formulation", meta["formulation"], meta.get("formulation_options"), problems)
        if factory is not None:
            try:  # a formulation is a few numbers: built, its own checks run
                factory(**dict(meta.get("formulation_options") or {}))
            except (TypeError, ValueError) as exc:
                problems.append(f"formulation {meta['formulation']!r} cannot be built with its formulation_options: {exc}")
    if meta.get("tokenizer"):
        factory = _component("tokenizers", "tokenizer", meta["tokenizer"], meta.get("tokenizer_options"), problems)
        made = None if factory is None else _declared(factory, "declared_latent_channels", meta.get("tokenizer_options") or {},
                                                    "tokenizer", meta["tokenizer"], problems)
        if made is not None and in_channels is not None and made != in_channels:
            problems.append(tokenizer_channels_problem(meta, made, in_channels))
    shapes = [meta["latent_shape"]] if meta.get("latent_shape") else []
    shapes += [s for s in meta.get("latent_shapes") or [] if s not in shapes]
    patch = getattr(config, "patch", None)
    for shape in shapes:
        c, t, h, w = (int(v) for v in shape)
        if in_channels is not None and c != in_channels:
            problems.append(f"latent_shape {list(shape)} has {c} channels but the model takes {in_channels} (in_channels): "
                            "the latent shape's C is the model's input channels")
        if isinstance(patch, (tuple, list)) and len(patch) == 3 and (t % patch[0] or h % patch[1] or w % patch[2]):
            problems.append(f"latent_shape {list(shape)}: T'xH'xW' {t}x{h}x{w} is not divisible by the model's patch "
                            f"{'x'.join(map(str, patch))}")
    kind = kind_of(config) if config is not None else "none"
    if meta.get("text_encoder"):
        factory = _component("text_encoders", "text_encoder", meta["text_encoder"], meta.get("text_encoder_options"), problems)
        width = None if factory is None else _declared(factory, "declared_width", meta.get("text_encoder_options") or {},
                                                       "text_encoder", meta["text_encoder"], problems)
        text_dim = getattr(config, "text_dim", 0)
        if kind == "text" and width is not None and width != text_dim:
            problems.append(f"the text encoder {meta['text_encoder']!r} gives {width}-wide embeddings but the model's "
                            f"text_dim is {text_dim}: its text_encoder_options are not those of the model's training data")
    elif kind == "text" and for_generation:
        problems.append("this model is text-conditional but its export names no text_encoder; accepted: "
                        f"{', '.join(vfm_models.host.names('text_encoders'))} (a weights-only export is written with "
                        "for_generation=False)")
    if config is not None and meta.get("null_condition") is not None:
        problem = null_condition_problem(meta["null_condition"], config)
        if problem:
            problems.append(problem)
    return problems


def check_export_meta(meta: Mapping[str, Any], where: str, *, for_generation: bool = True) -> Any:
    """The family config ``meta`` describes; else raise :class:`ExportGenerationError` naming every problem
    of ``meta`` (its family and config, and :func:`generation_problems`), starting with ``where``."""
    problems: list[str] = []
    config = family_config(meta, problems)
    problems += generation_problems(meta, config, for_generation=for_generation)
    if problems:
        head = "a problem" if len(problems) == 1 else f"{len(problems)} problems"
        raise ExportGenerationError(f"{where}: {head} with the export's meta: {'; '.join(problems)}")
    return config
