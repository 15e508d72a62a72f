"""Building blocks of the families' parallel plans (which linears are column/row-parallel)."""

from __future__ import annotations

from typing import Dict

from vfm_models.blocks.mlp import mlp_tp_plan
from vfm_models.families.plan import ParallelPlan


def attention_tp(prefix: str) -> Dict[str, str]:
    """q/k/v projections are column-parallel (heads split), the output projection row-parallel."""
    return {f"{prefix}.q": "colwise", f"{prefix}.k": "colwise", f"{prefix}.v": "colwise", f"{prefix}.o": "rowwise"}


def transformer_plan(model, attention: Dict[str, str], overrides=None) -> ParallelPlan:
    """The plan of a ``DiffusionTransformer``: TP pairs for every attention in ``attention`` and the MLP."""
    cfg = model.config
    tp: Dict[str, str] = {}
    for core_path in attention:
        tp.update(attention_tp(core_path.rsplit(".", 1)[0]))
    tp.update(mlp_tp_plan(cfg.mlp))
    return ParallelPlan(
        blocks="blocks",
        tp=tp,
        attention=attention,
        attention_overrides=overrides or {},
        conditioning=model.conditioning_modules(),
        pre_blocks=("x_embedder",),
        post_blocks=("final_layer",),
        num_heads=cfg.num_heads,
        num_kv_heads=cfg.kv_heads,
        num_layers=cfg.depth,
    )
