"""The options of a sharding run (:class:`ShardConfig`, the ``[shard]`` section of ``--config``), and
which of them a shards folder is tied to (:data:`IDENTITY`) or records for the next run
(:data:`BUCKETING`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from vfm_curator.config import CurateConfig
from vfm_curator.execution.spec import StageSpec
from vfm_curator.pipelines.shard_split import SPLIT_RULE

SHARD_STAGES = ("shard_decode", "shard_tokenize", "shard_text")
#: What a sample's latent and text depend on: a folder is only resumed with the same values.
IDENTITY = ("tokenizer", "tokenizer_options", "text_encoder", "text_encoder_options", "seed", "array_format", "latent_dtype")
#: Which bucket a clip goes to and how it is fitted: a re-run may change them, but clips sharded
#: before stay where they are, which the run says (see shard_settings._bucketing_notice).
BUCKETING = ("resolutions", "frames", "frame_stride", "windows", "max_upscale", "max_crop")
#: Which split a clip goes to: a folder is only resumed or topped up with the same values (a clip
#: must never move between train and val), each compared as its default where an older folder's
#: shard_config.json lacks it (those folders were made before the option, with the default).
SPLITTING = {"val_fraction": 0.0}
#: ... and the rule that turns a clip into a split (``shard_split.SPLIT_RULE``), recorded beside them:
#: not an option, this vfm's; a folder split by another is refused (shard_settings._check_identity).
SPLIT_RULE_KEY = "split_rule"


@dataclass
class ShardConfig:
    """Options of a sharding run. ``--config FILE`` (TOML or JSON)::

        [shard]
        tokenizer = "causal3d"
        text_encoder = "hash"
        resolutions = [[256, 256], [192, 320]]   # (H, W) buckets, by aspect ratio
        frames = [17, 9]                          # video frame counts (images are always 1)
        windows = 0                               # samples per clip: 0 = every window of frames that fits
        max_upscale = 2.0                         # refuse clips a bucket would enlarge more (default: no limit)
        max_crop = 0.3                            # refuse clips whose centre crop cuts more of the frame
        val_fraction = 0.05                       # source videos whose clips are held out in val shards (by a hash of the video's content)
        [shard.tokenizer_options]
        weights = "causal3d.safetensors"
        [run]                                      # as for vfm curate
        runner = "ray"

    ``stages`` and ``[options.<stage>]`` work as in the clipping config; the ``[shard]`` values
    above are handed to every stage that accepts an option of the same name.
    """

    tokenizer: str = "pixel"
    text_encoder: str = "hash"
    tokenizer_options: dict[str, Any] = field(default_factory=dict)
    text_encoder_options: dict[str, Any] = field(default_factory=dict)
    resolutions: list[list[int]] = field(default_factory=lambda: [[256, 256]])
    frames: list[int] = field(default_factory=lambda: [17])
    frame_stride: int = 1
    # samples per clip: consecutive windows of its frame count (the first is the clip's id, window k
    # "<id>-w<k>"); 0 = as many as the clip fills, 1 = only its first frames
    windows: int = 0
    max_upscale: float | None = None  # refuse a clip its bucket would enlarge more than this (None: any)
    max_crop: float | None = None  # refuse a clip whose centre crop cuts more of its frame than this (None: any)
    # the share of source videos held out for validation, in the val split part: every clip of a video goes
    # there when the SHA-256 of its split key (the video's content fingerprint: shard_split.split_key), as a
    # fraction in [0, 1), is below it (0: none, every clip trains)
    val_fraction: float = 0.0
    require_captions: bool = True
    max_shard_bytes: int = 1 << 30
    array_format: str = "npy"
    latent_dtype: str = "float32"
    patch_size: int = 1  # only for the token counts of the summary (the model's patch)
    temporal_patch: int = 1
    seed: int = 0  # only 0: random-init tokenizers and text encoders are built under it, as vfm train/generate build them
    device: str = "cpu"
    execution: CurateConfig = field(default_factory=lambda: CurateConfig(stages=list(SHARD_STAGES)))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ShardConfig":
        data = dict(data)
        shard = dict(data.pop("shard", {}))
        names = {f.name for f in fields(cls)} - {"execution"}
        unknown = set(shard) - names
        if unknown:
            raise ValueError(f"config [shard]: unknown key(s) {', '.join(sorted(unknown))}; accepted: {', '.join(sorted(names))}")
        execution = CurateConfig.from_dict(data)
        if "stages" not in data:
            execution.stages = list(SHARD_STAGES)
        return cls(execution=execution, **shard)

    @classmethod
    def load(cls, path: str | Path) -> "ShardConfig":
        from vfm_curator.config import read_config_file

        return cls.from_dict(read_config_file(path))

    def identity(self) -> dict[str, Any]:
        """What ``shard_config.json`` records and a re-run must match (:data:`IDENTITY`, :data:`SPLITTING`,
        this vfm's split rule)."""
        return {**{k: getattr(self, k) for k in (*IDENTITY, *SPLITTING)}, SPLIT_RULE_KEY: SPLIT_RULE}

    def stage_specs(self) -> list[StageSpec]:
        """The configured stages, each given the ``[shard]`` values it has an option for."""
        from vfm_curator.plugins import host

        self.execution.check()
        shared = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "execution"}
        specs = []
        for name in self.execution.stages:
            cls = host.get("stages", name)
            options = {**{k: v for k, v in shared.items() if k in cls.defaults}, **self.execution.stage_options(name)}
            stage = cls(**options)  # validate now, in the driver, with a clear error
            # a model on CUDA asks Ray for its GPU share (a worker that declares none sees no GPU)
            specs.append(StageSpec(cls, options, getattr(stage, "configured_resources", None)))
        return specs
