"""The trainer's parts for one rank, built from the :class:`Resolved` config that
:func:`vfm_cli.recipe.validate` returned: the config is resolved (and the shards' first samples
read) once per run, before the trainer starts; building the parts never resolves it again."""

from __future__ import annotations

from typing import Callable

import vfm_models
from vfm_parallel.trainer import RunContext, TrainParts
from vfm_parallel.trainer.batches import count_tokens

from vfm_cli.recipe.export import exporter, null_cond, recorded_meta
from vfm_cli.recipe.loaders import shard_loader, synthetic_loader
from vfm_cli.recipe.resolution import Resolved, grid_of, seq_len
from vfm_cli.recipe.watching import held_out_clips, previewer


def parts_builder(r: Resolved) -> Callable[[RunContext], TrainParts]:
    """The ``build`` callable :func:`vfm_parallel.trainer.train` takes, for the config resolved as ``r``."""
    return lambda ctx: build_parts(ctx, r)


def build_parts(ctx: RunContext, r: Resolved) -> TrainParts:
    """The trainer's parts for this rank (called by the trainer after seeding every rank alike)."""
    cfg = ctx.config
    model = vfm_models.get_family(cfg.model.family).build(r.mcfg)
    if cfg.model.init_from:  # fine-tuning: every rank starts from the same checkpoint weights
        from vfm_cli.recipe.init_from import load_init

        load_init(model, cfg)
    formulation = vfm_models.build_formulation(cfg.model.formulation, **cfg.model.formulation_options)
    tokens = seq_len(cfg, r)
    from vfm_models.flops import flops_per_token, model_flops_per_token

    # 6 N + 12 L h S (docs/design.md section 6): the convention of the published DiT throughput tables.
    n_params = sum(p.numel() for p in model.parameters())
    flops = model_flops_per_token(n_params, r.mcfg.depth, r.mcfg.hidden, tokens)
    # What the device executes for a sample of the first bucket (per-sample linears once per sample).
    text_len = max(1, r.shards.text_len if r.shards is not None else 0) if r.mcfg.text_dim else 0
    executed = flops_per_token(model, grid_of(r.latent_shape, r.mcfg), text_len)
    loader = (synthetic_loader(cfg, ctx, labelled=bool(getattr(r.mcfg, "num_classes", 0))) if cfg.data.source == "synthetic"
              else shard_loader(cfg, ctx, r))
    patch = r.mcfg.patch
    return TrainParts(model=model, formulation=formulation, loader=loader, flops_per_token=flops, executed_flops_per_token=executed,
                      count_tokens=lambda batch: count_tokens(batch, patch), seq_len=tokens, patch=tuple(patch),
                      export=exporter(cfg, r, formulation), export_meta=recorded_meta(cfg, r, formulation),
                      null_cond=null_cond(cfg, r, ctx.device), held_out=held_out_clips(cfg, r),
                      preview=previewer(cfg, r, formulation, ctx.device))
