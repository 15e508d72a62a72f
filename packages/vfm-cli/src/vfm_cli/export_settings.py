"""The generation settings ``vfm export --format vfm`` records instead of its source's (``--tokenizer``,
``--text-encoder`` and their options): a checkpoint of a run that wrote no export (``checkpoint.export =
false``) recorded settings that were never checked, and without these it could not be exported at all."""

from __future__ import annotations

from typing import Any, Mapping

#: the components whose settings the options replace (what a diffusers model folder does not record)
COMPONENTS = ("tokenizer", "text_encoder")

#: what each option supplies, for an error about the settings the export would record
HINT = ("the source's settings are replaced by --tokenizer NAME and --tokenizer-option KEY=VALUE (the tokenizer and "
        "its options), --text-encoder NAME and --text-encoder-option KEY=VALUE (the text encoder and its options); "
        "--format diffusers records none of them")


def option_name(component: str) -> str:
    return "--" + component.replace("_", "-")


def with_settings(meta: Mapping[str, Any], given: Mapping[str, tuple[str | None, dict]]) -> dict[str, Any]:
    """``meta`` with the settings ``given`` (component -> (name or None, options)): a name given replaces the
    component and its options (its options are then the ones given); options alone are added to the
    recorded ones. Raises ValueError for options of a component that is neither given nor recorded."""
    merged = dict(meta)
    for component, (name, options) in given.items():
        key = component + "_options"
        if name is not None:
            merged[component], merged[key] = name, dict(options)
        elif options:
            if not merged.get(component):
                raise ValueError(f"{option_name(component)}-option: the source records no {component.replace('_', ' ')} "
                                 f"to give options to; name one with {option_name(component)} NAME")
            merged[key] = {**dict(merged.get(key) or {}), **options}
    return merged


def without_settings(meta: Mapping[str, Any]) -> dict[str, Any]:
    """``meta`` less the components a diffusers model folder does not record: what it holds is not checked
    against them (a checkpoint's settings that could not generate still export the weights)."""
    return {k: v for k, v in meta.items() if k not in COMPONENTS and k.removesuffix("_options") not in COMPONENTS}
