"""Builds what the trainer is given (model, formulation, loader, FLOPs per token, export) from a
training config, by calling vfm-models and vfm-data. vfm-parallel never imports either; this is
the one place that knows all three.

With ``data.source = "shards"`` the shards decide what the config leaves open: the model's
``in_channels`` and ``text_dim`` follow the latents and text embeddings, and the tokenizer and text
encoder recorded in the samples' metadata go into the inference export, so that ``vfm generate``
encodes prompts with the encoder the shards were made with.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

import vfm_models
from vfm_parallel.trainer import RunContext, TrainParts
from vfm_parallel.trainer.batches import count_tokens, unpack
from vfm_parallel.trainer.config import ConfigError, TrainConfig


_SINGULAR = {"families": "family", "formulations": "formulation", "tokenizers": "tokenizer", "text_encoders": "text encoder"}


def _check_name(kind: str, name: str, key: str) -> None:
    """``name`` is registered as a ``kind`` (looked up without importing the plugin's module)."""
    names = vfm_models.host.names(kind)
    if name not in names:
        raise ConfigError(key, f"unknown {_SINGULAR[kind]} {name!r}; available: {', '.join(names)}")


def _check_formulation_options(cfg: TrainConfig) -> None:
    """``model.formulation_options`` are options the formulation takes, with values it accepts
    (it is built once here, which costs nothing: a formulation holds a few numbers)."""
    name, options = cfg.model.formulation, dict(cfg.model.formulation_options)
    cls = vfm_models.get_formulation(name)
    params = inspect.signature(cls).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        accepted = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        unknown = sorted(set(options) - set(accepted))
        if unknown:
            raise ConfigError(f"model.formulation_options.{unknown[0]}",
                              f"unknown option of formulation {name!r}; accepted: {', '.join(accepted) or '(none)'}")
    try:
        cls(**options)
    except (TypeError, ValueError) as exc:
        raise ConfigError("model.formulation_options", f"formulation {name!r} refuses {options}: {exc}") from None


# --- what the shards hold ----------------------------------------------------------------------------


@dataclass
class ShardInfo:
    """Read from the first sample of each dataset: shapes, text width, and how the samples were made."""

    datasets: list[Path]
    shapes: list[tuple[int, int, int, int]]  # latent (C, T, H, W) of each dataset's first sample
    text_dim: int
    tokenizer: str
    text_encoder: str
    tokenizer_options: dict = field(default_factory=dict)
    text_encoder_options: dict = field(default_factory=dict)
    text_len: int = 0  # real text tokens of the first sample (for the executed-FLOPs count)


def dataset_folders(cfg: TrainConfig) -> list[Path]:
    """The prepared dataset folders of ``data.blend`` (an energon metadataset v2) or ``data.shards``."""
    d = cfg.data
    if not d.blend:
        return [Path(p) for p in d.shards]
    import yaml

    blend = Path(d.blend)
    if not blend.is_file():
        raise ConfigError("data.blend", f"no blend file at {blend}")
    try:
        entries = yaml.safe_load(blend.read_text())["splits"]["train"]["blend"]
        return [(blend.parent / e["path"]).resolve() for e in entries]
    except (KeyError, TypeError, yaml.YAMLError) as exc:
        raise ConfigError("data.blend", f"{blend} is not a blend file (energon MetadatasetV2 with splits.train.blend): {exc}") from None


def _first_sample(folder: Path) -> tuple[tuple[int, ...], tuple[int, ...], dict]:
    """(latent shape, text shape, metadata) of the first decodable sample in ``folder`` (bad ones are
    skipped and warned as the loader does; a damaged shard is an error naming it)."""
    from vfm_data.errors import ShardError
    from vfm_data.sample import first_sample

    shards = sorted(folder.glob("*.tar")) if folder.is_dir() else []
    if not shards or not (folder / ".nv-meta").is_dir():
        raise ConfigError("data", f"{folder} is not a prepared shard folder (needs *.tar shards and .nv-meta/)")
    try:
        sample = first_sample(folder)
    except ShardError as exc:
        raise ConfigError("data", str(exc)) from None
    return tuple(sample.latent.shape), tuple(sample.text.shape), sample.meta


def check_trusted(cfg: TrainConfig) -> None:
    """The blend or shard folders hold only metadata vfm writes (docs/security.md), unless the
    config trusts their code; before anything (energon included) reads them further."""
    from vfm_data.trust import UntrustedDatasetError, check_dataset

    key = "data.blend" if cfg.data.blend else "data.shards"
    try:
        for path in [cfg.data.blend] if cfg.data.blend else cfg.data.shards:
            check_dataset(path, trust_dataset_code=cfg.data.trust_dataset_code)
    except UntrustedDatasetError as exc:
        raise ConfigError(key, str(exc)) from None


def probe_shards(cfg: TrainConfig) -> ShardInfo:
    check_trusted(cfg)
    folders = dataset_folders(cfg)
    samples = [_first_sample(f) for f in folders]
    text_dims = {text[1] for _, text, _ in samples}
    channels = {latent[0] for latent, _, _ in samples}
    if len(text_dims) > 1 or len(channels) > 1:
        raise ConfigError("data", f"the datasets disagree: latent channels {sorted(channels)}, text widths {sorted(text_dims)}")
    meta = samples[0][2]
    extra = meta.get("extra") or {}
    return ShardInfo(folders, [s[0] for s in samples], text_dims.pop(), meta.get("tokenizer", ""), meta.get("text_encoder", ""),
                     dict(extra.get("tokenizer_options") or {}), dict(extra.get("text_encoder_options") or {}),
                     text_len=int(meta.get("text_length") or samples[0][1][0]))


# --- the model and what the export records ----------------------------------------------------------


@dataclass
class Resolved:
    """The config with everything the shards decide filled in."""

    mcfg: Any  # the family's config dataclass
    latent_shape: tuple[int, int, int, int]  # (C, T, H, W) of the training data (the first bucket)
    tokenizer: str
    tokenizer_options: dict
    text_encoder: str  # "" unless the model is text-conditional
    text_encoder_options: dict
    shards: ShardInfo | None = None


def _family_config(cfg: TrainConfig, options: dict) -> Any:
    family = vfm_models.get_family(cfg.model.family)
    if "patch" in options:
        options["patch"] = tuple(options["patch"])  # TOML has arrays, the dataclass wants a tuple
    try:
        return family.config(cfg.model.preset or None, **options)
    except (KeyError, TypeError, ValueError) as exc:
        key = "model.preset" if "preset" in str(exc) else "model.options"
        raise ConfigError(key, str(exc).strip("'\"")) from None


def _agree(key: str, configured: str, recorded: str, what: str) -> str:
    if configured and recorded and configured != recorded:
        raise ConfigError(key, f"{configured!r}, but the shards were made with the {what} {recorded!r}")
    return configured or recorded


def data_available(cfg: TrainConfig) -> bool:
    """Whether the shards the config names are on this machine (a blend file or the folders)."""
    if cfg.data.source == "synthetic":
        return True
    return Path(cfg.data.blend).is_file() if cfg.data.blend else all(Path(p).is_dir() for p in cfg.data.shards)


def resolve(cfg: TrainConfig, *, probe: bool = True) -> Resolved:
    """The family config and the export's names; checks the data against the model.

    ``probe=False`` (validating a config away from its data) takes ``data.latent_shape`` and the
    model section as they are, without reading shards.
    """
    _check_name("families", cfg.model.family, "model.family")
    m, options = cfg.model, dict(cfg.model.options)
    fields = {f.name for f in dataclasses.fields(vfm_models.get_family(m.family).config_cls)}
    if cfg.data.source == "shards" and not probe:
        options.setdefault("in_channels", cfg.data.latent_shape[0])
        mcfg = _family_config(cfg, options)
        return Resolved(mcfg, tuple(cfg.data.latent_shape), m.tokenizer, dict(m.tokenizer_options),
                        m.text_encoder if mcfg.text_dim else "", dict(m.text_encoder_options))
    if cfg.data.source == "synthetic":
        options.setdefault("in_channels", cfg.data.latent_shape[0])
        if "num_classes" in fields:
            options.setdefault("num_classes", cfg.data.num_classes)
        mcfg = _family_config(cfg, options)
        if mcfg.text_dim:
            raise ConfigError("data.source", "synthetic data is class-conditional; text-conditional families need shards")
        return Resolved(mcfg, tuple(cfg.data.latent_shape), m.tokenizer or "pixel", dict(m.tokenizer_options), "", {})
    info = probe_shards(cfg)
    channels = info.shapes[0][0]
    if options.setdefault("in_channels", channels) != channels:
        raise ConfigError("model.options.in_channels", f"the model takes {options['in_channels']} channels but the shards' latents have {channels}")
    if options.get("num_classes", 0):
        raise ConfigError("model.options.num_classes", "shards carry no class labels; train text-conditional or unconditional (num_classes = 0)")
    if "num_classes" in fields:
        options["num_classes"] = 0
    text_model = _family_config(cfg, dict(options)).text_dim > 0
    if text_model and options.setdefault("text_dim", info.text_dim) != info.text_dim:
        raise ConfigError("model.options.text_dim", f"the model's text_dim is {options['text_dim']} but the shards' text embeddings "
                          f"({info.text_encoder or 'unknown encoder'}) are {info.text_dim} wide; they must be equal")
    mcfg = _family_config(cfg, options)
    tokenizer = _agree("model.tokenizer", m.tokenizer, info.tokenizer, "tokenizer")
    tok_options = dict(m.tokenizer_options) if m.tokenizer else info.tokenizer_options
    text_encoder, te_options = "", {}
    if text_model:
        text_encoder = _agree("model.text_encoder", m.text_encoder, info.text_encoder, "text encoder")
        te_options = dict(m.text_encoder_options) if m.text_encoder else info.text_encoder_options
    return Resolved(mcfg, info.shapes[0], tokenizer, tok_options, text_encoder, te_options, info)


def validate(cfg: TrainConfig, world_size: int | None = None, *, require_data: bool = True) -> Resolved:
    """Check every name the config uses against the plugin registries, the data against the model,
    and (with ``world_size``) the mesh against the model (heads % tp, layers % pp, tokens % cp). The
    model is built on the meta device, so a 28B config costs nothing; a bad config fails before any
    process group starts. ``require_data=False`` skips the shard checks when the shards are not here."""
    from vfm_cli.paths import folder_problem

    problem = folder_problem(Path(cfg.train.out_dir))
    if problem:
        raise ConfigError("train.out_dir", problem)
    probed = require_data or data_available(cfg)
    r = resolve(cfg, probe=probed)
    _check_name("formulations", cfg.model.formulation, "model.formulation")
    _check_formulation_options(cfg)
    # Names left to the shards ("") can only be checked with the shards at hand.
    if r.tokenizer:
        _check_name("tokenizers", r.tokenizer, "model.tokenizer")
    elif probed:
        raise ConfigError("model.tokenizer", "the shards do not record their tokenizer; name it in model.tokenizer")
    if r.text_encoder:
        _check_name("text_encoders", r.text_encoder, "model.text_encoder")
    elif r.mcfg.text_dim and probed:
        raise ConfigError("model.text_encoder", "a text-conditional model needs the name of the text encoder the shards were made with")
    pt, ph, pw = r.mcfg.patch
    if cfg.data.source == "shards" and ph != pw:
        raise ConfigError("model.options.patch", f"the shard loader cuts square patches; got ph={ph}, pw={pw}")
    _, t, h, w = r.latent_shape
    if cfg.data.source == "synthetic" and (t % pt or h % ph or w % pw):
        raise ConfigError("data.latent_shape", f"(T, H, W) = {(t, h, w)} is not divisible by the patch {r.mcfg.patch}")
    if world_size is not None:
        from vfm_parallel import LayoutError, ParallelDims

        with torch.device("meta"):
            plan = vfm_models.get_family(cfg.model.family).build(r.mcfg).parallel_plan()
        try:
            ParallelDims(**cfg.parallel.resolved(world_size)).validate(world_size, plan, seq_len(cfg, r))
        except LayoutError as exc:
            raise ConfigError("parallel", str(exc)) from None
    return r


def grid_of(latent_shape: tuple[int, ...], mcfg: Any) -> tuple[int, int, int]:
    _, t, h, w = latent_shape
    pt, ph, pw = mcfg.patch
    return t // pt, h // ph, w // pw


def seq_len(cfg: TrainConfig, r: Resolved) -> int:
    """Tokens of one model input: a pack when packing, else a sample of the first bucket."""
    if cfg.data.packing:
        return cfg.data.max_seq_len
    t, h, w = grid_of(r.latent_shape, r.mcfg)
    return t * h * w


# --- data ------------------------------------------------------------------------------------------


def _synthetic_loader(cfg: TrainConfig, ctx: RunContext):
    from vfm_parallel.trainer.synthetic import SyntheticLoader, make_blobs

    d = cfg.data
    latents, labels = make_blobs(d.num_samples, tuple(d.latent_shape), d.num_classes)
    return SyntheticLoader(latents, labels, d.micro_batch, ctx.coords.dp_rank, ctx.coords.dp_size)


class ShardBatches:
    """vfm-data's resumable loader, giving the trainer dense ``{"x0", "cond"}`` or packed
    ``{"x0s", "cond", "num_tokens"}`` micro-batches (see :mod:`vfm_parallel.trainer.batches`)."""

    def __init__(self, loader: Any, mcfg: Any) -> None:
        self.loader, self.mcfg = loader, mcfg

    def _cond(self, batch: Any) -> dict[str, torch.Tensor]:
        if not self.mcfg.text_dim:
            return {}  # unconditional
        return {"text": batch.text.float(), "text_mask": batch.text_mask.bool()}

    def __iter__(self):
        for batch in self.loader:
            # "keys": the samples' keys, which the trainer names when a step's loss is not finite
            if hasattr(batch, "latents"):  # VideoBatch: one bucket, stacked
                yield {"x0": batch.latents.float(), "cond": self._cond(batch), "keys": list(batch.keys)}
            else:  # PackedBatch: padded packs of patch tokens -> the samples' latents
                x0s = unpack(batch.patches.float(), batch.seq_ids, batch.grids, self.mcfg.in_channels, self.mcfg.patch)
                yield {"x0s": x0s, "cond": self._cond(batch), "num_tokens": int(batch.num_tokens), "keys": list(batch.keys)}

    def state_dict(self) -> dict[str, Any]:
        return self.loader.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.loader.load_state_dict(state)

    def metrics(self) -> dict[str, float]:
        """Samples the loader skipped, for the trainer's metrics (``data_skipped``, ``data_<reason>``)."""
        return self.loader.metrics()


def _shard_loader(cfg: TrainConfig, ctx: RunContext, r: Resolved) -> ShardBatches:
    from vfm_data import make_loader

    d = cfg.data
    folders = r.shards.datasets
    path: Any = d.blend if d.blend else folders[0]
    if not d.blend and len(folders) > 1:  # an in-memory blend, weighted equally
        path = {"__module__": "megatron.energon", "__class__": "MetadatasetV2",
                "splits": {"train": {"blend": [{"weight": 1.0, "path": str(f.resolve())} for f in folders]}}}
    pt, ph, _ = r.mcfg.patch
    common = dict(patch_size=ph, temporal_patch=pt, batch_size=d.micro_batch, num_workers=d.workers,
                  latent_channels=r.mcfg.in_channels, seed=cfg.train.seed, dp_rank=ctx.coords.dp_rank,
                  dp_world=ctx.coords.dp_size, trust_dataset_code=d.trust_dataset_code)
    if d.packing:
        loader = make_loader(path, max_seq_len=d.max_seq_len, blender="weighted", **common)
    else:
        durations = list(d.durations) or sorted({shape[1] for shape in r.shards.shapes})
        loader = make_loader(path, blender="bucketed", blender_options={"batch_size": d.micro_batch, "durations": durations}, **common)
    return ShardBatches(loader, r.mcfg)


# --- export ----------------------------------------------------------------------------------------


def export_meta(cfg: TrainConfig, r: Resolved, formulation: Any) -> dict[str, Any]:
    """``config.json`` of the inference export (contracts.md section 3), with the null condition
    the model was trained on, the condition dropout and the guidance scale ``vfm generate`` uses
    when none is given (the formulation's default, or 1 = no guidance when nothing trained the null)."""
    from vfm_models.conditioning import describe

    trained_null = cfg.train.cond_dropout > 0 and describe(r.mcfg)["kind"] != "none"
    return {
        "family": cfg.model.family,
        "config": r.mcfg,
        "formulation": cfg.model.formulation,
        "formulation_options": formulation.options(),
        "tokenizer": r.tokenizer,
        "tokenizer_options": dict(r.tokenizer_options),
        "text_encoder": r.text_encoder,
        "text_encoder_options": dict(r.text_encoder_options),
        "latent_shape": list(r.latent_shape),
        "null_condition": describe(r.mcfg),
        "cond_dropout": cfg.train.cond_dropout,
        "guidance": float(formulation.default_guidance) if trained_null else 1.0,
    }


def null_cond(cfg: TrainConfig, r: Resolved):
    """Condition dropout's substitute ``(cond, drop) -> cond`` (vfm_models.conditioning), or None
    when dropout is off or the model is unconditional. A text model's null is its text encoder's
    embedding of the empty caption, so the encoder is built here once (seeded apart from the
    model's init, as the sharding pipeline seeds it) and dropped after that one caption."""
    from vfm_models.conditioning import kind_of, null_condition, with_null

    kind = kind_of(r.mcfg)
    if cfg.train.cond_dropout <= 0 or kind == "none":
        return None
    encoder = None
    if kind == "text":
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            encoder = vfm_models.get_text_encoder(r.text_encoder)(**dict(r.text_encoder_options))
    try:
        null = null_condition(r.mcfg, encoder)
    except ValueError as exc:
        raise ConfigError("model.text_encoder", str(exc)) from None
    del encoder
    return lambda cond, drop: with_null(cond, null, drop)


def _exporter(cfg: TrainConfig, r: Resolved, formulation: Any):
    from vfm_models.export import save_export

    family = vfm_models.get_family(cfg.model.family)

    def export(folder: Path, weights: dict[str, torch.Tensor]) -> None:
        model = family.build(r.mcfg)
        model.load_state_dict(weights, strict=True)  # every EMA weight is there, with its shape
        save_export(folder, model, export_meta(cfg, r, formulation))

    return export


def build_parts(ctx: RunContext) -> TrainParts:
    """The trainer's parts for this rank (called by the trainer after seeding every rank alike)."""
    cfg = ctx.config
    r = resolve(cfg)
    model = vfm_models.get_family(cfg.model.family).build(r.mcfg)
    formulation = vfm_models.get_formulation(cfg.model.formulation)(**cfg.model.formulation_options)
    tokens = seq_len(cfg, r)
    from vfm_models.flops import flops_per_token, model_flops_per_token

    # 6 N + 12 L h S (docs/design.md section 6): the convention of the published DiT throughput tables.
    n_params = sum(p.numel() for p in model.parameters())
    flops = model_flops_per_token(n_params, r.mcfg.depth, r.mcfg.hidden, tokens)
    # What the device executes for a sample of the first bucket (per-sample linears once per sample).
    text_len = max(1, r.shards.text_len if r.shards is not None else 0) if r.mcfg.text_dim else 0
    executed = flops_per_token(model, grid_of(r.latent_shape, r.mcfg), text_len)
    loader = _synthetic_loader(cfg, ctx) if cfg.data.source == "synthetic" else _shard_loader(cfg, ctx, r)
    patch = r.mcfg.patch
    return TrainParts(model=model, formulation=formulation, loader=loader, flops_per_token=flops, executed_flops_per_token=executed,
                      count_tokens=lambda batch: count_tokens(batch, patch), seq_len=tokens, patch=tuple(patch),
                      export=_exporter(cfg, r, formulation), null_cond=null_cond(cfg, r))
