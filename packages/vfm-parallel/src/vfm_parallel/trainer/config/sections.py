"""The training config's sections: one dataclass per TOML table, with its defaults and what each key means."""


import dataclasses
from dataclasses import dataclass, field
from typing import Any


class ConfigError(ValueError):
    """A config value is wrong: names the dotted key and says what is accepted."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"config key '{key}': {reason}")
        self.key = key
        self.reason = reason

    def __reduce__(self):  # rebuilt from its fields, so it crosses processes (Ray workers, spawn)
        return type(self), (self.key, self.reason)


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
    init_from: str = ""  # a vfm export, diffusers model folder or DiT .pt the model starts from ("" = random init)


#: What ``parallel.activation_checkpointing`` accepts.
CHECKPOINTING = (False, True, "full", "selective")


@dataclass
class ParallelConfig:
    """Mesh sizes, outermost first (pp, dp_replicate, dp_shard, cp, tp); dp_shard = -1 fills the rest."""

    pp: int = 1
    dp_replicate: int = 1
    dp_shard: int = -1
    cp: int = 1
    tp: int = 1
    strategies: list = field(default_factory=list)  # [] = what vfm_parallel.parallelize picks for the dims
    # false | true (= "full": recompute each checkpointed block) | "selective" (keep the matmul and
    # attention outputs, recompute the element-wise ops between them): the `ac` strategy's mode
    activation_checkpointing: bool | str = False
    # how many blocks of each pipeline stage (of the model without pp) to checkpoint, the first ones
    # (Megatron's --recompute-method block --recompute-num-layers n); 0 = all
    checkpoint_blocks: int = 0
    compile: bool = False
    pp_schedule: str = "1f1b"  # gpipe | 1f1b
    pp_microbatches: int = 0  # pipeline microbatches per micro-batch; 0 = pp (must divide data.micro_batch)
    # options of the chosen strategies' apply, by strategy name: [parallel.strategy_options.compile]
    # mode = "max-autotune", [parallel.strategy_options.fsdp] reshard_after_forward = false, a plugin's own;
    # ac and pp take theirs from the keys above
    strategy_options: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.checkpointing()  # a bad value fails when the section is read, naming what is accepted

    def checkpointing(self) -> dict[str, Any]:
        """The `ac` strategy's options these keys ask for (``{}`` = no checkpointing)."""
        ac, blocks = self.activation_checkpointing, self.checkpoint_blocks
        if not (isinstance(ac, bool) or (isinstance(ac, str) and ac in CHECKPOINTING)):
            raise ConfigError("parallel.activation_checkpointing",
                              f"must be false, true (= \"full\"), \"full\" or \"selective\", got {ac!r}")
        if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 0:
            raise ConfigError("parallel.checkpoint_blocks",
                              f"must be an int >= 0 (blocks checkpointed per pipeline stage, the first ones; 0 = all), got {blocks!r}")
        if blocks and ac is False:
            raise ConfigError("parallel.checkpoint_blocks",
                              f"{blocks} blocks to checkpoint, but parallel.activation_checkpointing is false; "
                              "set it to true, \"full\" or \"selective\" (or checkpoint_blocks = 0)")
        if ac is False:
            return {}
        if self.strategies and "ac" not in self.strategies:  # an explicit list is what runs: say so, do not skip it
            raise ConfigError("parallel.activation_checkpointing",
                              f"is {'true' if ac is True else repr(ac)} but parallel.strategies = {self.strategies} has no \"ac\"; add \"ac\" to the "
                              "strategies (or leave them empty for vfm's defaults)")
        return {"mode": "full" if ac is True else ac, "blocks": blocks}

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
    # the vfm-data blender (a registered name: `vfm plugins --kind blenders`); "" = bucketed for dense
    # batches (one bucket per batch, of data.micro_batch and data.durations), weighted for packing
    blender: str = ""
    blender_options: dict = field(default_factory=dict)  # the blender's options (bucketed: batch_size, durations default as above)
    workers: int = 0  # data worker processes (0 = in the training process)
    # Model-parallel subset loading: the pp x cp x tp ranks of one data-parallel rank read its steps in
    # turn (each 1/n of the bytes) and broadcast them; false: each reads every step itself. Either way
    # the same samples in the same order (so tp, cp and pp may still change at a resume).
    subset_loading: bool = True
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
    # torch's fused AdamW kernel: "auto" = on CUDA, "on" = on any device, "off" = never; for plain
    # and sharded (FSDP, TP) parameters alike. A fused optimizer also skips a non-finite step on
    # the device (no host sync per step: trainer/health.py).
    fused: str = "auto"


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
    # Warm the decay up (diffusers' EMAModel): update t (t counting the updates applied) blends with
    # min(decay, (1 + t) / (10 + t)), so a run shorter than the EMA's memory (0.999: ~1000 steps)
    # exports its trained weights, not its random start. false: decay from the first update.
    warmup: bool = True


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


#: What ``validation.weights`` accepts: whose loss ``val_loss`` is (auto: the EMA's when ema.enabled).
VALIDATION_WEIGHTS = ("auto", "ema", "model", "both")


@dataclass
class ValidationConfig:
    """A held-out loss every ``interval`` steps, at fixed noise levels and fixed noise draws, so that it is
    comparable from step to step and run to run (the training loss jumps with its random levels)."""

    interval: int = 0  # steps between validations; 0 = off
    # the held-out clips: a blend file or prepared dataset folder (shards), or "" = the training
    # data's `split` part (shards) / held-out blobs of the same distribution (synthetic)
    blend: str = ""
    split: str = "val"  # the split part read from `blend` (or from the training data when blend is "")
    samples: int = 8  # held-out clips, the first ones of the split in shard and file order
    levels: int = 8  # noise levels: evenly spaced quantiles of the formulation's training distribution
    seed: int = 0  # of the noise drawn per (clip, level)
    # whose loss: "auto" (the EMA weights when ema.enabled, else the model's), "ema", "model", or
    # "both" (val_loss of the EMA weights and val_loss_model of the model's)
    weights: str = "auto"


@dataclass
class PreviewConfig:
    """Videos generated from the EMA weights every ``interval`` steps with fixed prompts and seed, written
    to RUN/previews/step_N/ (MP4s and a contact sheet) so a person can watch the model learn."""

    interval: int = 0  # steps between previews; 0 = off
    prompts: list = field(default_factory=list)  # [] = one unconditional video (or class 0 .. n-1: see `count`)
    count: int = 4  # videos when prompts is []: class labels 0 .. count-1 of a class model, else unconditional seeds
    seed: int = 0  # video i draws its noise with seed + i
    steps: int = 16  # sampler steps
    sampler: str = ""  # "" = the formulation's default sampler
    guidance: float = -1.0  # classifier-free guidance scale; -1 = the export's default
    size: list = field(default_factory=list)  # [H, W] in pixels; [] = the training data's
    frames: int = 0  # 0 = the training data's
    fps: float = 8.0


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
    validation: ValidationConfig = field(default_factory=ValidationConfig)
    preview: PreviewConfig = field(default_factory=PreviewConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def noise_chunks(self) -> int:
        """Token chunks the trainer draws the noise in (1 = the formulation draws it whole)."""
        return self.train.noise_chunks or self.parallel.cp

    def validate(self, world_size: int | None = None) -> "TrainConfig":
        """Range and cross-field checks; ``world_size`` also checks the mesh. Returns self."""
        from vfm_parallel.trainer.config.validation import validate  # validation reads these sections

        validate(self, world_size)
        return self
