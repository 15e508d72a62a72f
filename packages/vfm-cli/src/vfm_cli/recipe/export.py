"""What the run leaves for inference: the export's ``config.json`` (:func:`export_meta`), the
function that writes the export (:func:`exporter`), and condition dropout's null condition
(:func:`null_cond`), which the export records."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import torch

import vfm_models
from vfm_parallel.trainer.config import ConfigError, TrainConfig

from vfm_cli.recipe.resolution import Resolved


def export_meta(cfg: TrainConfig, r: Resolved, formulation: Any) -> dict[str, Any]:
    """``config.json`` of the inference export (contracts.md section 3), with the null condition
    the model was trained on, the condition dropout and the guidance scale ``vfm generate`` uses
    when none is given (the formulation's default, or 1 = no guidance when nothing trained the null)."""
    from vfm_models.conditioning import describe

    from vfm_cli.recipe.data_shapes import data_shapes

    trained_null = cfg.train.cond_dropout > 0 and describe(r.mcfg)["kind"] != "none"
    # as the loader cuts them (frames buckets): a blend of buckets trains on each, generation's
    # default is the first, and a shape among them is no "shape it never saw"
    shapes = list(dict.fromkeys(tuple(shape) for _, shape in data_shapes(cfg, r)))
    return {
        "family": cfg.model.family,
        "config": r.mcfg,
        "formulation": cfg.model.formulation,
        "formulation_options": formulation.options(),
        "tokenizer": r.tokenizer,
        "tokenizer_options": dict(r.tokenizer_options),
        "text_encoder": r.text_encoder,
        "text_encoder_options": dict(r.text_encoder_options),
        "latent_shape": list(shapes[0]),
        "latent_shapes": [list(shape) for shape in shapes],
        "null_condition": describe(r.mcfg),
        "cond_dropout": cfg.train.cond_dropout,
        "guidance": float(formulation.default_guidance) if trained_null else 1.0,
    }


def check_export(cfg: TrainConfig, r: Resolved, *, complete: bool) -> None:
    """The export the run writes at its end must be able to generate with its model: refused now, as a
    :class:`ConfigError`, not by ``save_export`` once the training has finished. ``complete=False`` (the
    shards not at hand, names left to them unknown yet): only what the config names is checked."""
    from vfm_models.export_generation import generation_problems

    formulation = vfm_models.build_formulation(cfg.model.formulation, **cfg.model.formulation_options)
    problems = generation_problems(export_meta(cfg, r, formulation), r.mcfg, for_generation=complete)
    if problems:
        raise ConfigError("model", f"the export this run writes could not generate: {'; '.join(problems)}")


def null_cond(cfg: TrainConfig, r: Resolved, device: torch.device | str = "cpu"):
    """Condition dropout's substitute ``(cond, drop) -> cond`` (vfm_models.conditioning), or None
    when dropout is off or the model is unconditional. A text model's null is its text encoder's
    embedding of the empty caption, so the encoder is built here once (seeded apart from the
    model's init, as the sharding pipeline seeds it) and dropped after that one caption. The null
    is moved to ``device`` (the run's) once: kept on the host, every step would copy it there."""
    from vfm_models.conditioning import kind_of, null_condition, with_null

    kind = kind_of(r.mcfg)
    if cfg.train.cond_dropout <= 0 or kind == "none":
        return None
    encoder = None
    if kind == "text":
        from vfm_models.seeded import build_seeded

        encoder = build_seeded(functools.partial(vfm_models.build_text_encoder, r.text_encoder),
                               dict(r.text_encoder_options))
    try:
        null = null_condition(r.mcfg, encoder)
    except ValueError as exc:
        raise ConfigError("model.text_encoder", str(exc)) from None
    del encoder
    null = {k: v.to(device) for k, v in null.items()}
    return lambda cond, drop: with_null(cond, null, drop)


def recorded_meta(cfg: TrainConfig, r: Resolved, formulation: Any) -> dict[str, Any]:
    """:func:`export_meta` as JSON, for every checkpoint's ``state.json`` (``vfm export CHECKPOINT``
    writes the export from it, without the shards or the config the run was started with)."""
    from vfm_models.export import plain_meta

    return plain_meta(export_meta(cfg, r, formulation))


def exporter(cfg: TrainConfig, r: Resolved, formulation: Any):
    """``export(folder, weights)``: the trained (EMA) weights in a fresh model, saved with :func:`export_meta`."""
    from vfm_models.export import save_export

    family = vfm_models.get_family(cfg.model.family)

    def export(folder: Path, weights: dict[str, torch.Tensor]) -> None:
        model = family.build(r.mcfg)
        model.load_state_dict(weights, strict=True)  # every EMA weight is there, with its shape
        save_export(folder, model, export_meta(cfg, r, formulation))

    return export
