"""Builds what the trainer is given (model, formulation, loader, FLOPs per token, export) from a
training config, by calling vfm-models and vfm-data. vfm-parallel never imports either; this is
the one place that knows all three.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch

import vfm_models
from vfm_parallel.trainer import RunContext, TrainParts
from vfm_parallel.trainer.config import ConfigError, TrainConfig


_SINGULAR = {"families": "family", "formulations": "formulation", "tokenizers": "tokenizer", "text_encoders": "text encoder"}


def _check_name(kind: str, name: str, key: str) -> None:
    """``name`` is registered as a ``kind`` (looked up without importing the plugin's module)."""
    names = vfm_models.host.names(kind)
    if name not in names:
        raise ConfigError(key, f"unknown {_SINGULAR[kind]} {name!r}; available: {', '.join(names)}")


def model_config(cfg: TrainConfig) -> Any:
    """The family's config dataclass: preset, then ``model.options``; channels follow the data."""
    _check_name("families", cfg.model.family, "model.family")
    family = vfm_models.get_family(cfg.model.family)
    options = dict(cfg.model.options)
    if "patch" in options:
        options["patch"] = tuple(options["patch"])  # TOML has arrays, the dataclass wants a tuple
    options.setdefault("in_channels", cfg.data.latent_shape[0])
    if cfg.data.source == "synthetic" and "num_classes" in {f.name for f in dataclasses.fields(family.config_cls)}:
        options.setdefault("num_classes", cfg.data.num_classes)
    try:
        return family.config(cfg.model.preset or None, **options)
    except (KeyError, TypeError, ValueError) as exc:
        key = "model.preset" if "preset" in str(exc) else "model.options"
        raise ConfigError(key, str(exc).strip("'\"")) from None


def validate(cfg: TrainConfig, world_size: int | None = None) -> None:
    """Check every name the config uses against the plugin registries, the data shape, and (with
    ``world_size``) the mesh against the model (heads % tp, layers % pp, tokens % cp). The model is
    built on the meta device, so a 28B config costs nothing; a bad config fails before any process
    group starts."""
    mcfg = model_config(cfg)
    _check_name("formulations", cfg.model.formulation, "model.formulation")
    _check_name("tokenizers", cfg.model.tokenizer, "model.tokenizer")
    if cfg.model.text_encoder:
        _check_name("text_encoders", cfg.model.text_encoder, "model.text_encoder")
    if cfg.data.source == "synthetic":
        _, t, h, w = cfg.data.latent_shape
        pt, ph, pw = mcfg.patch
        if t % pt or h % ph or w % pw:
            raise ConfigError("data.latent_shape", f"(T, H, W) = {(t, h, w)} is not divisible by the patch {mcfg.patch}")
        if getattr(mcfg, "text_dim", 0):
            raise ConfigError("data.source", "synthetic data is class-conditional; text-conditional families need shards")
    if cfg.data.packing:
        raise ConfigError("data.packing", "packed training batches are not supported by the trainer yet; set packing = false")
    if world_size is not None:
        from vfm_parallel import LayoutError, ParallelDims

        with torch.device("meta"):
            plan = vfm_models.get_family(cfg.model.family).build(mcfg).parallel_plan()
        grid = grid_of(cfg, mcfg)
        try:
            ParallelDims(**cfg.parallel.resolved(world_size)).validate(world_size, plan, grid[0] * grid[1] * grid[2])
        except LayoutError as exc:
            raise ConfigError("parallel", str(exc)) from None


def grid_of(cfg: TrainConfig, mcfg: Any) -> tuple[int, int, int]:
    _, t, h, w = cfg.data.latent_shape
    pt, ph, pw = mcfg.patch
    return t // pt, h // ph, w // pw


def _synthetic_loader(cfg: TrainConfig, ctx: RunContext):
    from vfm_parallel.trainer.synthetic import SyntheticLoader, make_blobs

    d = cfg.data
    latents, labels = make_blobs(d.num_samples, tuple(d.latent_shape), d.num_classes)
    return SyntheticLoader(latents, labels, d.micro_batch, ctx.coords.dp_rank, ctx.coords.dp_size)


class ShardBatches:
    """vfm-data's resumable loader, giving the trainer ``{"x0", "cond"}`` micro-batches."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def __iter__(self):
        for batch in self.loader:
            latents = getattr(batch, "latents", None)
            if latents is None:
                raise TypeError(f"the trainer needs stacked latents (VideoBatch); the loader gave {type(batch).__name__}")
            yield {"x0": latents, "cond": {"text": batch.text, "text_mask": batch.text_mask}}

    def state_dict(self) -> dict[str, Any]:
        return self.loader.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.loader.load_state_dict(state)


def _shard_loader(cfg: TrainConfig, ctx: RunContext, mcfg: Any):
    from vfm_data import make_loader

    d = cfg.data
    path = d.blend or (d.shards[0] if len(d.shards) == 1 else {"shards": list(d.shards)})
    return ShardBatches(make_loader(
        path, patch_size=mcfg.patch[1], temporal_patch=mcfg.patch[0], batch_size=d.micro_batch,
        num_workers=d.workers, latent_channels=mcfg.in_channels, seed=cfg.train.seed,
        dp_rank=ctx.coords.dp_rank, dp_world=ctx.coords.dp_size, blender="bucketed",
    ))


def export_meta(cfg: TrainConfig, mcfg: Any) -> dict[str, Any]:
    """``config.json`` of the inference export (contracts.md section 3)."""
    return {
        "family": cfg.model.family,
        "config": json.loads(json.dumps(dataclasses.asdict(mcfg))),
        "formulation": cfg.model.formulation,
        "formulation_options": dict(cfg.model.formulation_options),
        "tokenizer": cfg.model.tokenizer,
        "tokenizer_options": dict(cfg.model.tokenizer_options),
        "text_encoder": cfg.model.text_encoder,
        "text_encoder_options": dict(cfg.model.text_encoder_options),
        "latent_shape": list(cfg.data.latent_shape),
        "vfm_models_version": vfm_models.__version__,
    }


def _exporter(cfg: TrainConfig, mcfg: Any):
    family = vfm_models.get_family(cfg.model.family)

    def export(folder: Path, weights: dict[str, torch.Tensor]) -> None:
        model = family.build(mcfg)
        model.load_state_dict(weights, strict=True)
        meta = export_meta(cfg, mcfg)
        try:
            from vfm_models.export import save_export
        except ImportError:  # until vfm_models.export lands: the same folder layout, written here
            from vfm_models.checkpoint import save_state_dict

            folder.mkdir(parents=True, exist_ok=True)
            save_state_dict(folder / "model.safetensors", model.state_dict())
            (folder / "config.json").write_text(json.dumps(meta, indent=2))
            return
        save_export(folder, model, meta)

    return export


def build_parts(ctx: RunContext) -> TrainParts:
    """The trainer's parts for this rank (called by the trainer after seeding every rank alike)."""
    cfg = ctx.config
    mcfg = model_config(cfg)
    model = vfm_models.get_family(cfg.model.family).build(mcfg)
    formulation = vfm_models.get_formulation(cfg.model.formulation)(**cfg.model.formulation_options)
    grid = grid_of(cfg, mcfg)
    seq_len = grid[0] * grid[1] * grid[2]
    from vfm_models.flops import model_flops_per_token

    # 6 N + 12 L h S (DESIGN.md section 6): the convention of the published DiT throughput tables.
    n_params = sum(p.numel() for p in model.parameters())
    flops = model_flops_per_token(n_params, mcfg.depth, mcfg.hidden, seq_len)
    loader = _synthetic_loader(cfg, ctx) if cfg.data.source == "synthetic" else _shard_loader(cfg, ctx, mcfg)
    pt, ph, pw = mcfg.patch

    def count_tokens(batch: dict[str, Any]) -> int:
        b, _, t, h, w = batch["x0"].shape
        return b * (t // pt) * (h // ph) * (w // pw)

    return TrainParts(model=model, formulation=formulation, loader=loader, flops_per_token=flops,
                      count_tokens=count_tokens, seq_len=seq_len, export=_exporter(cfg, mcfg))
