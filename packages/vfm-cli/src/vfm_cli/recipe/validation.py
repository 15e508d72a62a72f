"""The recipe's checks before any process group starts: :func:`validate` resolves the config once
and checks its names, every dataset's latent shape against the model (:mod:`~vfm_cli.recipe.data_shapes`)
and (with a world size) the mesh against the model and every bucket's sequence."""

from __future__ import annotations

import math
from pathlib import Path

import torch

import vfm_models
from vfm_parallel.trainer.config import ConfigError, TrainConfig

from vfm_cli.recipe.names import check_blender, check_formulation_options, check_name, check_option_names
from vfm_cli.recipe.data_shapes import check_data_shapes, data_shapes
from vfm_cli.recipe.export import check_export
from vfm_cli.recipe.ema_horizon import note_short_ema
from vfm_cli.recipe.resolution import Resolved, grid_of, resolve, seq_len
from vfm_cli.recipe.shards import data_available


def validate(cfg: TrainConfig, world_size: int | None = None, *, require_data: bool = True,
             hardware: list | None = None) -> Resolved:
    """Check every name the config uses against the plugin registries, the data against the model,
    and (with ``world_size``) the mesh against the model (heads % tp, layers % pp, tokens % cp). The
    model is built on the meta device, so a 28B config costs nothing; a bad config fails before any
    process group starts. ``require_data=False`` skips the shard checks when the shards are not here.
    ``hardware``: a list collects what this machine's hardware could not run (a
    :class:`vfm_parallel.HardwareError`, e.g. megatron-sp without CUDA) instead of refusing it, for
    a check of a config meant for other machines (``vfm train --validate``).

    Returns the :class:`Resolved` config, which :func:`vfm_cli.recipe.parts_builder` builds the run
    from (so a run resolves its config, and reads the shards' first samples, once)."""
    from vfm_cli.paths import folder_problem

    problem = folder_problem(Path(cfg.train.out_dir))
    if problem:
        raise ConfigError("train.out_dir", problem)
    probed = require_data or data_available(cfg)
    r = resolve(cfg, probe=probed)
    _check_text_encoder_wanted(cfg, r)
    check_name("formulations", cfg.model.formulation, "model.formulation")
    check_formulation_options(cfg)
    check_blender(cfg)
    # Names left to the shards ("") can only be checked with the shards at hand.
    if r.tokenizer:
        check_name("tokenizers", r.tokenizer, "model.tokenizer")
        check_option_names("tokenizers", r.tokenizer, r.tokenizer_options, "model.tokenizer_options")
    elif probed:
        raise ConfigError("model.tokenizer", "the shards do not record their tokenizer; name it in model.tokenizer")
    if r.text_encoder:
        check_name("text_encoders", r.text_encoder, "model.text_encoder")
        check_option_names("text_encoders", r.text_encoder, r.text_encoder_options, "model.text_encoder_options")
    elif r.mcfg.text_dim and probed:
        raise ConfigError("model.text_encoder", "a text-conditional model needs the name of the text encoder the shards were made with")
    pt, ph, pw = r.mcfg.patch
    if cfg.data.source == "shards" and ph != pw:
        raise ConfigError("model.options.patch", f"the shard loader cuts square patches; got ph={ph}, pw={pw}")
    check_data_shapes(cfg, r)
    if cfg.checkpoint.export:
        check_export(cfg, r, complete=probed)
    note_short_ema(cfg)
    if cfg.model.init_from:
        from vfm_cli.recipe.init_from import check_init

        check_init(cfg, r.mcfg)
    if world_size is not None:
        _check_mesh(cfg, r, world_size, hardware)
    return r


def _check_text_encoder_wanted(cfg: TrainConfig, r: Resolved) -> None:
    """A text encoder, or its options, configured for a model that takes no text would be dropped
    without a word (the export records none): refused, naming the family and the key."""
    if r.mcfg.text_dim:
        return
    for key, value in (("model.text_encoder", cfg.model.text_encoder),
                       ("model.text_encoder_options", cfg.model.text_encoder_options)):
        if value:
            raise ConfigError(key, f"{value!r}, but this model of family {cfg.model.family!r} takes no text (text_dim 0), "
                                   "so it would be ignored; remove it, or choose a text-conditional family "
                                   "(e.g. dit-cross) or model.options.text_dim > 0")


def _check_mesh(cfg: TrainConfig, r: Resolved, world_size: int, hardware: list | None = None) -> None:
    from vfm_parallel import LayoutError, ParallelDims
    from vfm_parallel.parallel_model import check_sequence, check_strategies
    from vfm_parallel.trainer.distributed import check_strategy_options, default_strategies

    from vfm_models.families.plan import parallel_plan_of

    with torch.device("meta"):  # a plugin's model without parallel_plan(): one error naming its family
        plan = parallel_plan_of(vfm_models.get_family(cfg.model.family).build(r.mcfg), cfg.model.family)
    sizes = cfg.parallel.resolved(world_size)
    dims = ParallelDims(**sizes)
    try:
        dims.validate(world_size, plan, seq_len(cfg, r))
    except LayoutError as exc:
        raise ConfigError("parallel", str(exc)) from None
    blocks, per_stage = cfg.parallel.checkpoint_blocks, plan.num_layers // dims.pp
    if blocks > per_stage:  # the ac strategy would refuse it on every rank once the run has started
        raise ConfigError("parallel.checkpoint_blocks",
                          f"{blocks} blocks to checkpoint per pipeline stage, but the model has {plan.num_layers} "
                          f"blocks{f' in {dims.pp} stages' if dims.pp > 1 else ''} ({per_stage} per stage); "
                          f"accepted: 0 (all) to {per_stage}")
    strategies = list(cfg.parallel.strategies) or default_strategies(cfg.parallel, sizes)
    try:  # what parallelize would refuse once every rank has started: refused here, before
        chosen = check_strategies(dims, strategies, plan, hardware=hardware)
    except LayoutError as exc:
        defaults = "" if cfg.parallel.strategies else f" (parallel.strategies = [] chose {', '.join(strategies) or 'none'} from the dims)"
        raise ConfigError("parallel.strategies", f"{exc}{defaults}") from None
    check_strategy_options(cfg.parallel, strategies)  # not only once every rank has started
    if dims.cp > 1:
        _check_cp_groups(cfg, r, plan, dims.cp, strategies)
    if cfg.data.packing:
        return
    for index, (where, shape) in enumerate(data_shapes(cfg, r)):  # every bucket is a sequence cp (or sp) splits
        tokens = math.prod(grid_of(shape, r.mcfg))
        if index:  # the first bucket's tokens were checked against cp above, as seq_len
            try:
                dims.validate(world_size, None, tokens)
            except LayoutError as exc:
                raise ConfigError("parallel", f"{where}: {exc}") from None
        try:  # sp keeps tokens/tp per rank: the first forward of such a bucket failed on every rank
            check_sequence(dims, chosen, tokens)
        except LayoutError as exc:
            raise ConfigError("parallel.strategies", f"{where}: latent (C, T, H, W) = {shape}: {exc}") from None


def _check_cp_groups(cfg: TrainConfig, r: Resolved, plan, cp: int, strategies: list[str]) -> None:
    """A CP strategy that deals whole groups to the cp ranks (cp-hybrid: frames for spatial attention,
    patch positions for temporal) checks every bucket's grid with its own ``check_batch`` (packing
    with cp is refused by the config itself)."""
    from vfm_parallel.strategy import get_strategy

    for name in strategies:
        strategy = get_strategy(name)
        # not a CP strategy (whose own check_batch, if any, is no CP grid check), or a CP plugin without one
        if getattr(strategy, "phase", None) != "cp" or not hasattr(strategy, "check_batch"):
            continue
        for where, shape in data_shapes(cfg, r):
            try:
                strategy.check_batch(plan, cfg.data.micro_batch, grid_of(shape, r.mcfg), cp)
            except ValueError as exc:
                raise ConfigError("parallel", f"{where}: latent (C, T, H, W) = {shape}, data.micro_batch = "
                                              f"{cfg.data.micro_batch}: {exc}") from None
