"""Every range and cross-field rule of the training config, one function per section.

Validation runs before any process group starts, so a bad key fails fast on every rank with the
same message. The ``model`` and ``data`` sections name things other packages provide (families,
formulations, shard paths); their names are checked by whoever builds them (``vfm_cli.recipe``),
their shapes and ranges here.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from vfm_parallel.trainer.config.sections import VALIDATION_WEIGHTS, ConfigError, TrainConfig


DTYPES = ("auto", "fp32", "bf16")
SOURCES = ("shards", "synthetic")
OPTIMIZERS = ("adamw",)
FUSED_MODES = ("auto", "on", "off")
PP_SCHEDULES = ("gpipe", "1f1b")
RESUME_CHANGES = ("model", "seed", "batch", "data", "layout")  # checkpoint.allow_changes (trainer/resume.py)


def _require(ok: bool, key: str, reason: str) -> None:
    if not ok:
        raise ConfigError(key, reason)


def _non_finite(value: Any, key: str) -> tuple[str, float] | None:
    """The first (key, value) below ``value`` that is a float but not finite (inf, nan), or None."""
    if dataclasses.is_dataclass(value):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        items = ((f"{key}.{k}" if key else str(k), v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((key, v) for v in value)  # a list is named by its key: optim.betas
    else:
        return (key, value) if isinstance(value, float) and not math.isfinite(value) else None
    return next((found for k, v in items if (found := _non_finite(v, k)) is not None), None)


def check_finite(cfg: TrainConfig) -> None:
    """No float anywhere in the config (options tables included) is inf or nan: TOML reads ``inf``
    and ``nan`` as floats, and one of them in lr, eps or weight decay trains NaN from step 1."""
    found = _non_finite(cfg, "")
    if found is not None:
        raise ConfigError(found[0], f"must be a finite number, got {found[1]}")


def check_strategies(names: list) -> None:
    """Every name in ``parallel.strategies`` is a registered strategy (listing the available ones)."""
    from vfm_parallel.plugins import host

    available = host.names("strategies")
    for name in names:
        _require(isinstance(name, str), "parallel.strategies", f"must be a list of strategy names, got {name!r}")
        _require(name in available, "parallel.strategies", f"unknown strategy {name!r}; available: {', '.join(available)}")


def validate(cfg: TrainConfig, world_size: int | None = None) -> None:
    """Every range and cross-field rule; raises :class:`ConfigError` on the first broken one."""
    check_finite(cfg)
    _require(bool(cfg.model.family), "model.family", "must name a model family")
    _require(bool(cfg.model.formulation), "model.formulation", "must name a formulation (edm, rectified-flow, ...)")
    check_parallel(cfg, world_size)
    check_data(cfg)
    check_train(cfg)  # before optim: the warm-up is checked against train.steps, which must be valid first
    check_optim(cfg)
    check_rest(cfg)
    check_validation(cfg)
    check_preview(cfg)


def check_parallel(cfg: TrainConfig, world_size: int | None) -> None:
    """Mesh sizes and strategies (with ``world_size``: their product), and what pipelining needs."""
    p, d = cfg.parallel, cfg.data
    for name in ("pp", "dp_replicate", "cp", "tp"):
        _require(getattr(p, name) >= 1, f"parallel.{name}", f"must be >= 1, got {getattr(p, name)}")
    _require(p.dp_shard >= 1 or p.dp_shard == -1, "parallel.dp_shard", f"must be >= 1 or -1 (fill), got {p.dp_shard}")
    check_strategies(p.strategies)
    for name, value in p.strategy_options.items():
        _require(isinstance(value, dict), f"parallel.strategy_options.{name}",
                 f"must be a table of the strategy's options, got {value!r}")
        _require(name not in ("ac", "pp"), f"parallel.strategy_options.{name}",
                 "ac takes its options from parallel.activation_checkpointing and checkpoint_blocks, pp from "
                 "parallel.pp_schedule and pp_microbatches")
    _require(p.pp_schedule in PP_SCHEDULES, "parallel.pp_schedule", f"must be one of {', '.join(PP_SCHEDULES)}, got {p.pp_schedule!r}")
    _require(p.pp_microbatches >= 0, "parallel.pp_microbatches", f"must be >= 0 (0 = pp), got {p.pp_microbatches}")
    _require(p.pp == 1 or p.cp == 1, "parallel.cp", f"pipeline training (pp = {p.pp}) does not combine with context parallelism yet; got cp = {p.cp}; "
             f"accepted: cp = 1 with pp > 1, or pp = 1 with cp > 1")
    check_pipeline(cfg)
    if world_size is None:
        return
    sizes = p.resolved(world_size)
    product = 1
    for v in sizes.values():
        product *= v
    _require(
        product == world_size,
        "parallel",
        f"pp*dp_replicate*dp_shard*cp*tp = {'*'.join(str(v) for v in sizes.values())} = {product} "
        f"but the world size is {world_size}; accepted: sizes whose product is {world_size} (dp_shard = -1 fills what "
        f"the others leave), or {product} processes (torchrun --nproc-per-node {product})",
    )
    _require(not (d.packing and not p.strategies and sizes["dp_replicate"] > 1 and sizes["dp_shard"] == 1),
             "data.packing", "packed batches need fsdp or hsdp; dp_replicate > 1 with dp_shard = 1 picks ddp")


def check_data(cfg: TrainConfig) -> None:
    """Source, batch and packing settings (packing against the parallel layout)."""
    p, d = cfg.parallel, cfg.data
    _require(d.source in SOURCES, "data.source", f"must be one of {', '.join(SOURCES)}, got {d.source!r}")
    if d.source == "shards":
        _require(bool(d.blend) or bool(d.shards), "data", "source 'shards' needs data.blend or data.shards")
        # the loader reads the blend when both are set: the folders would be ignored without a word
        _require(not (d.blend and d.shards), "data", f"data.blend = {d.blend!r} and data.shards = {d.shards} name the "
                 "data twice; set one of data.blend and data.shards (the other to \"\" or [])")
    _require(all(isinstance(p, str) and p for p in d.shards), "data.shards",
             f"must be a list of dataset folder paths (strings), got {d.shards!r}")
    _require(d.micro_batch >= 1, "data.micro_batch", f"must be >= 1, got {d.micro_batch}")
    _require(d.max_seq_len >= 0, "data.max_seq_len", f"must be >= 0, got {d.max_seq_len}")
    _require(not d.packing or d.max_seq_len > 0, "data.max_seq_len", "packing needs max_seq_len > 0")
    _require(d.workers >= 0, "data.workers", f"must be >= 0, got {d.workers}")
    _require(all(isinstance(v, int) and v >= 1 for v in d.durations), "data.durations",
             f"must be positive latent frame counts, got {d.durations}")
    if d.packing:
        # Packed batches enter the model through forward_packed: data parallelism wraps it (FSDP
        # hooks it too), the model-parallel strategies and DDP only see forward().
        others = {n: getattr(p, n) for n in ("pp", "cp", "tp") if getattr(p, n) > 1}
        _require(not others, "data.packing",
                 f"packed batches train with data parallelism (fsdp/hsdp) only; got {others}")
        _require("ddp" not in p.strategies, "data.packing", "packed batches need fsdp or hsdp, not ddp")
    _require(
        len(d.latent_shape) == 4 and all(isinstance(v, int) and v >= 1 for v in d.latent_shape),
        "data.latent_shape",
        f"must be four positive ints (C, T, H, W), got {d.latent_shape}",
    )
    _require(d.num_samples >= 1, "data.num_samples", f"must be >= 1, got {d.num_samples}")


def check_optim(cfg: TrainConfig) -> None:
    """AdamW's settings and the learning-rate schedule (warm-up against train.steps)."""
    o, t = cfg.optim, cfg.train
    _require(o.name in OPTIMIZERS, "optim.name", f"must be one of {', '.join(OPTIMIZERS)}, got {o.name!r}")
    _require(o.lr > 0, "optim.lr", f"must be > 0, got {o.lr}")
    _require(
        len(o.betas) == 2 and all(isinstance(b, (int, float)) and 0 <= b < 1 for b in o.betas),
        "optim.betas",
        f"must be two numbers in [0, 1), got {o.betas}",
    )
    _require(o.eps > 0, "optim.eps", f"must be > 0, got {o.eps}")
    _require(o.weight_decay >= 0, "optim.weight_decay", f"must be >= 0, got {o.weight_decay}")
    _require(o.warmup_steps >= 0, "optim.warmup_steps", f"must be >= 0, got {o.warmup_steps}")
    _require(o.warmup_steps <= t.steps, "optim.warmup_steps", f"{o.warmup_steps} is more than train.steps = {t.steps}; "
             f"accepted: 0 to {t.steps} (warmup_steps <= train.steps)")
    _require(0 <= o.min_lr_ratio <= 1, "optim.min_lr_ratio", f"must be in [0, 1], got {o.min_lr_ratio}")
    _require(o.grad_clip >= 0, "optim.grad_clip", f"must be >= 0 (0 = off), got {o.grad_clip}")
    _require(o.grad_accum >= 1, "optim.grad_accum", f"must be >= 1, got {o.grad_accum}")
    _require(o.fused in FUSED_MODES, "optim.fused", f"must be one of {', '.join(FUSED_MODES)}, got {o.fused!r}")


def check_train(cfg: TrainConfig) -> None:
    """Steps, noise chunks (against cp and packing), condition dropout, the non-finite limit, out_dir."""
    p, d, t = cfg.parallel, cfg.data, cfg.train
    _require(t.steps >= 1, "train.steps", f"must be >= 1, got {t.steps}")
    _require(t.noise_chunks >= 0, "train.noise_chunks", f"must be >= 0 (0 = parallel.cp), got {t.noise_chunks}")
    _require(p.cp == 1 or t.noise_chunks in (0, p.cp), "train.noise_chunks",
             f"must be 0 or parallel.cp = {p.cp} (one chunk per CP rank's shard), got {t.noise_chunks}")
    _require(not (d.packing and t.noise_chunks > 1), "train.noise_chunks", "chunked noise needs dense batches, not packing")
    _require(0 <= t.cond_dropout < 1, "train.cond_dropout", f"must be in [0, 1) (0 = off), got {t.cond_dropout}")
    _require(t.max_nonfinite_steps >= 1, "train.max_nonfinite_steps",
             f"must be >= 1 (non-finite steps in a row that stop the run), got {t.max_nonfinite_steps}")
    _require(0 <= t.stop_at <= t.steps, "train.stop_at", f"must be in [0, train.steps = {t.steps}], got {t.stop_at}")
    _require(bool(t.out_dir), "train.out_dir", "must be a folder path")


def check_rest(cfg: TrainConfig) -> None:
    """The small sections: precision, ema, checkpoint, logging."""
    _require(cfg.precision.dtype in DTYPES, "precision.dtype", f"must be one of {', '.join(DTYPES)}, got {cfg.precision.dtype!r}")
    _require(0 <= cfg.ema.decay < 1, "ema.decay", f"must be in [0, 1), got {cfg.ema.decay}")
    c = cfg.checkpoint
    _require(c.interval >= 0, "checkpoint.interval", f"must be >= 0 (0 = only at the end), got {c.interval}")
    _require(c.keep >= 1, "checkpoint.keep", f"must be >= 1, got {c.keep}")
    _require(bool(c.resume), "checkpoint.resume", "must be auto, none or a checkpoint folder")
    _require(all(g in RESUME_CHANGES for g in c.allow_changes), "checkpoint.allow_changes",
             f"must name groups of settings among {', '.join(RESUME_CHANGES)}, got {c.allow_changes}")
    _require(cfg.logging.interval >= 1, "logging.interval", f"must be >= 1, got {cfg.logging.interval}")
    _require(cfg.logging.peak_tflops >= 0, "logging.peak_tflops", f"must be >= 0, got {cfg.logging.peak_tflops}")


def check_pipeline(cfg: TrainConfig) -> None:
    """What running the pipeline schedule needs of the batch: ``data.micro_batch`` samples split
    into the schedule's microbatches, at least pp of them for 1F1B (part of :func:`validate`)."""
    p, d = cfg.parallel, cfg.data
    if p.pp == 1:
        return
    n_micro = p.pp_microbatches or p.pp
    _require(p.pp_schedule != "1f1b" or n_micro >= p.pp, "parallel.pp_microbatches",
             f"1f1b needs at least pp = {p.pp} microbatches, got {n_micro}")
    _require(d.micro_batch % n_micro == 0, "data.micro_batch",
             f"{d.micro_batch} samples do not split into {n_micro} pipeline microbatches (parallel.pp_microbatches, "
             f"default pp = {p.pp}); use a multiple of {n_micro}")


def check_validation(cfg: TrainConfig) -> None:
    """The held-out loss: its schedule, clip and level counts, whose weights, and what it cannot run under."""
    v = cfg.validation
    _require(v.interval >= 0, "validation.interval", f"must be >= 0 (steps between validations; 0 = off), got {v.interval}")
    _require(v.samples >= 1, "validation.samples", f"must be >= 1 (held-out clips), got {v.samples}")
    _require(v.levels >= 1, "validation.levels", f"must be >= 1 (fixed noise levels), got {v.levels}")
    _require(v.seed >= 0, "validation.seed", f"must be >= 0, got {v.seed}")
    _require(bool(v.split), "validation.split", "must name a split part (e.g. \"val\")")
    _require(v.weights in VALIDATION_WEIGHTS, "validation.weights",
             f"must be one of {', '.join(VALIDATION_WEIGHTS)}, got {v.weights!r}")
    _require(cfg.ema.enabled or v.weights not in ("ema", "both"), "validation.weights",
             f"{v.weights!r} needs the EMA weights, but ema.enabled is false; accepted: \"auto\" or \"model\" "
             "(or ema.enabled = true)")
    # The pipeline schedule runs forward and backward together; a forward-only pass over the stages
    # is not wired in yet, so the loss would have to be gathered another way: refused, not faked.
    _require(v.interval == 0 or cfg.parallel.pp == 1, "validation.interval",
             f"the held-out loss does not run under pipeline parallelism yet (parallel.pp = {cfg.parallel.pp}); "
             "accepted: validation.interval = 0 with pp > 1, or pp = 1 (previews run under any layout)")


def check_preview(cfg: TrainConfig) -> None:
    """The preview videos: schedule, prompts, sampler settings and size."""
    v = cfg.preview
    _require(v.interval >= 0, "preview.interval", f"must be >= 0 (steps between previews; 0 = off), got {v.interval}")
    _require(all(isinstance(p, str) for p in v.prompts), "preview.prompts",
             f"must be a list of prompts (strings; a class model's: class indices as text, \"3\"), got {v.prompts!r}")
    _require(v.count >= 1, "preview.count", f"must be >= 1 (videos when preview.prompts is []), got {v.count}")
    _require(v.seed >= 0, "preview.seed", f"must be >= 0, got {v.seed}")
    _require(v.steps >= 1, "preview.steps", f"must be >= 1 (sampler steps), got {v.steps}")
    _require(v.guidance == -1.0 or v.guidance >= 0, "preview.guidance",
             f"must be >= 0 (1 = no guidance) or -1 (the export's default), got {v.guidance}")
    _require(v.size == [] or (len(v.size) == 2 and all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in v.size)),
             "preview.size", f"must be [] (the training data's) or [H, W] in pixels, got {v.size!r}")
    _require(v.frames >= 0, "preview.frames", f"must be >= 0 (0 = the training data's), got {v.frames}")
    _require(v.fps > 0, "preview.fps", f"must be > 0, got {v.fps}")
