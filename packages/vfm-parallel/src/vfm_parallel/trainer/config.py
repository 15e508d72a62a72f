"""The training config: TOML sections as dataclasses, validation with key and reason, ``--set`` overrides.

Validation runs before any process group starts, so a bad key fails fast on every rank with the
same message. The ``model`` and ``data`` sections name things other packages provide (families,
formulations, shard paths); their names are checked by whoever builds them (``vfm_cli.compose``),
their shapes and ranges here.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A config value is wrong: names the dotted key and says what is accepted."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"config key '{key}': {reason}")
        self.key = key
        self.reason = reason


@dataclass
class ModelConfig:
    family: str = "dit"
    preset: str = ""  # "" = the family's dataclass defaults
    options: dict = field(default_factory=dict)  # dims that override the preset (depth, hidden, ...)
    formulation: str = "edm"
    formulation_options: dict = field(default_factory=dict)
    tokenizer: str = ""  # "" = the one the shards were made with (synthetic data: pixel)
    tokenizer_options: dict = field(default_factory=dict)
    text_encoder: str = ""  # "" = the shards' (text-conditional families) or none
    text_encoder_options: dict = field(default_factory=dict)


@dataclass
class ParallelConfig:
    """Mesh sizes, outermost first (pp, dp_replicate, dp_shard, cp, tp); dp_shard = -1 fills the rest."""

    pp: int = 1
    dp_replicate: int = 1
    dp_shard: int = -1
    cp: int = 1
    tp: int = 1
    strategies: list = field(default_factory=list)  # [] = what vfm_parallel.parallelize picks for the dims
    activation_checkpointing: bool = False
    compile: bool = False
    pp_schedule: str = "1f1b"  # gpipe | 1f1b
    pp_microbatches: int = 0  # pipeline microbatches per micro-batch; 0 = pp (must divide data.micro_batch)

    def resolved(self, world_size: int) -> dict[str, int]:
        """The five sizes with dp_shard filled in for ``world_size``."""
        fixed = self.pp * self.dp_replicate * self.cp * self.tp
        dp_shard = self.dp_shard if self.dp_shard != -1 else max(world_size // fixed, 1)
        return {"pp": self.pp, "dp_replicate": self.dp_replicate, "dp_shard": dp_shard, "cp": self.cp, "tp": self.tp}


@dataclass
class DataConfig:
    source: str = "shards"  # "shards" (vfm-data loader) | "synthetic" (in-memory, for tiny runs and tests)
    blend: str = ""  # a blend file (vfm-data), or
    shards: list = field(default_factory=list)  # prepared dataset folders (vfm-data / energon)
    micro_batch: int = 1  # per rank per micro-step: samples (dense) or packs of max_seq_len tokens (packing)
    max_seq_len: int = 0  # tokens per packed sequence; 0 = no packing
    packing: bool = False  # false: bucketed dense batches (one shape each); true: packed THD sequences
    durations: list = field(default_factory=list)  # latent frame counts of the buckets; [] = those in the shards
    workers: int = 0  # data worker processes (0 = in the training process)
    # Let energon build the objects and run the code a dataset's or blend's YAML names (docs/security.md);
    # false: vfm_data.trust refuses metadata vfm did not write.
    trust_dataset_code: bool = False
    # synthetic: the samples' (C, T, H, W); shards: only for `vfm train --validate` away from the shards
    latent_shape: list = field(default_factory=lambda: [3, 1, 8, 8])
    # synthetic source only:
    num_samples: int = 64
    num_classes: int = 10


@dataclass
class OptimConfig:
    name: str = "adamw"
    lr: float = 1e-4
    betas: list = field(default_factory=lambda: [0.9, 0.999])
    eps: float = 1e-8
    weight_decay: float = 0.0
    warmup_steps: int = 0
    min_lr_ratio: float = 0.0  # cosine decays from lr to lr * min_lr_ratio at the last step
    grad_clip: float = 1.0  # 0 = no clipping
    grad_accum: int = 1


@dataclass
class TrainSection:
    steps: int = 100  # the schedule's length
    stop_at: int = 0  # stop (and checkpoint) after this step, e.g. a time-limited job; 0 = run to steps
    seed: int = 0
    out_dir: str = "runs/vfm"
    # Token chunks the noise is drawn in, chunk j from the noise stream at cp = j (seed table 3);
    # 0 = parallel.cp. Set it to a CP run's cp to reproduce that run's noise on fewer ranks.
    noise_chunks: int = 0
    # Condition dropout: each sample trains on the null condition (the null class, or the text
    # encoder's embedding of the empty caption) with this probability, so that classifier-free
    # guidance has a trained unconditional branch. 0 = off (then guidance defaults to 1).
    cond_dropout: float = 0.1
    # A step whose loss or gradient norm is not finite is skipped (no update, no EMA); this many
    # such steps in a row stop the run with an error naming them, before anything is exported.
    max_nonfinite_steps: int = 3


@dataclass
class PrecisionConfig:
    dtype: str = "auto"  # auto (fp32 on CPU, bf16 autocast on GPU) | fp32 | bf16


@dataclass
class EMAConfig:
    enabled: bool = True
    decay: float = 0.999


@dataclass
class CheckpointConfig:
    interval: int = 0  # steps between saves; 0 = only at the end
    keep: int = 3  # newest complete checkpoints kept
    resume: str = "auto"  # auto (newest intact one in out_dir/checkpoints) | none | a checkpoint folder
    # Groups of saved settings a resume may find changed (trainer/resume.py): model, seed, batch, data, layout
    allow_changes: list = field(default_factory=list)
    export: bool = True  # write the EMA (or plain) weights as an inference export at the end


@dataclass
class LoggingConfig:
    interval: int = 1
    tensorboard: bool = True
    loss_curve: bool = True
    progress: bool = True
    peak_tflops: float = 0.0  # 0 = the device table (GPU) or a measured matmul peak (CPU)


@dataclass
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainSection = field(default_factory=TrainSection)
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    ema: EMAConfig = field(default_factory=EMAConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def noise_chunks(self) -> int:
        """Token chunks the trainer draws the noise in (1 = the formulation draws it whole)."""
        return self.train.noise_chunks or self.parallel.cp

    def validate(self, world_size: int | None = None) -> "TrainConfig":
        """Range and cross-field checks; ``world_size`` also checks the mesh. Returns self."""
        validate(self, world_size)
        return self


# --- building from dicts ---------------------------------------------------------------------------

_SCALARS = {int: (int,), float: (int, float), str: (str,), bool: (bool,), list: (list,), dict: (dict,)}


def _field_type(cls: type, f: dataclasses.Field) -> Any:
    hints = typing.get_type_hints(cls)
    return hints[f.name]


def _coerce(key: str, value: Any, kind: Any) -> Any:
    accepted = _SCALARS.get(kind)
    if accepted is None:
        return value
    # bool is an int subclass in Python; TOML keeps them apart and so do we.
    ok = isinstance(value, accepted) and (kind is bool) == isinstance(value, bool)
    if not ok:
        raise ConfigError(key, f"expected {kind.__name__}, got {type(value).__name__} {value!r}")
    return float(value) if kind is float else value


def _build(cls: type, data: Any, prefix: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(prefix, f"expected a table, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        where = f"{prefix}.{unknown[0]}" if prefix else unknown[0]
        raise ConfigError(where, f"unknown key; accepted: {', '.join(fields)}")
    values = {}
    for name, value in data.items():
        key = f"{prefix}.{name}" if prefix else name
        kind = _field_type(cls, fields[name])
        if dataclasses.is_dataclass(kind):
            values[name] = _build(kind, value, key)
        else:
            values[name] = _coerce(key, value, kind)
    return cls(**values)


def from_dict(data: dict[str, Any], world_size: int | None = None) -> TrainConfig:
    """A validated config from nested dicts (as TOML parses them)."""
    return _build(TrainConfig, data, "").validate(world_size)


def parse_override(item: str) -> tuple[list[str], Any]:
    """``"optim.lr=1e-4"`` -> (["optim", "lr"], 1e-4). The value is read as TOML, else a string."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(item, "an override must look like section.key=value")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()  # bare words: --set model.family=dit
    return key.split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``--set`` items to nested dicts (a copy); unknown keys are caught by validation."""
    out = _deepcopy(data)
    for item in overrides:
        path, value = parse_override(item)
        node = out
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(".".join(path), f"'{part}' is a value, not a table")
            node = child
        node[path[-1]] = value
    return out


def _deepcopy(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _deepcopy(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_deepcopy(v) for v in data]
    return data


def load(path: str | Path, overrides: list[str] = (), world_size: int | None = None) -> TrainConfig:
    """Read a TOML config, apply ``--set`` overrides, validate."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError("<file>", f"no config file at {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("<file>", f"{path} is not valid TOML: {exc}") from None
    return from_dict(apply_overrides(data, list(overrides)), world_size)


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


# --- validation ------------------------------------------------------------------------------------

DTYPES = ("auto", "fp32", "bf16")
SOURCES = ("shards", "synthetic")
OPTIMIZERS = ("adamw",)
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
    m, p, d, o, t = cfg.model, cfg.parallel, cfg.data, cfg.optim, cfg.train
    check_finite(cfg)
    _require(bool(m.family), "model.family", "must name a model family")
    _require(bool(m.formulation), "model.formulation", "must name a formulation (edm, rectified-flow, ...)")
    for name in ("pp", "dp_replicate", "cp", "tp"):
        _require(getattr(p, name) >= 1, f"parallel.{name}", f"must be >= 1, got {getattr(p, name)}")
    _require(p.dp_shard >= 1 or p.dp_shard == -1, "parallel.dp_shard", f"must be >= 1 or -1 (fill), got {p.dp_shard}")
    check_strategies(p.strategies)
    _require(p.pp_schedule in PP_SCHEDULES, "parallel.pp_schedule", f"must be one of {', '.join(PP_SCHEDULES)}, got {p.pp_schedule!r}")
    _require(p.pp_microbatches >= 0, "parallel.pp_microbatches", f"must be >= 0 (0 = pp), got {p.pp_microbatches}")
    _require(p.pp == 1 or p.cp == 1, "parallel.cp", f"pipeline training (pp = {p.pp}) does not combine with context parallelism yet; got cp = {p.cp}")
    check_pipeline(cfg)
    if world_size is not None:
        sizes = p.resolved(world_size)
        product = 1
        for v in sizes.values():
            product *= v
        _require(
            product == world_size,
            "parallel",
            f"pp*dp_replicate*dp_shard*cp*tp = {'*'.join(str(v) for v in sizes.values())} = {product} "
            f"but the world size is {world_size}",
        )
        _require(not (d.packing and not p.strategies and sizes["dp_replicate"] > 1 and sizes["dp_shard"] == 1),
                 "data.packing", "packed batches need fsdp or hsdp; dp_replicate > 1 with dp_shard = 1 picks ddp")
    _require(d.source in SOURCES, "data.source", f"must be one of {', '.join(SOURCES)}, got {d.source!r}")
    if d.source == "shards":
        _require(bool(d.blend) or bool(d.shards), "data", "source 'shards' needs data.blend or data.shards")
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
    _require(o.warmup_steps <= t.steps, "optim.warmup_steps", f"{o.warmup_steps} is more than train.steps = {t.steps}")
    _require(0 <= o.min_lr_ratio <= 1, "optim.min_lr_ratio", f"must be in [0, 1], got {o.min_lr_ratio}")
    _require(o.grad_clip >= 0, "optim.grad_clip", f"must be >= 0 (0 = off), got {o.grad_clip}")
    _require(o.grad_accum >= 1, "optim.grad_accum", f"must be >= 1, got {o.grad_accum}")
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

