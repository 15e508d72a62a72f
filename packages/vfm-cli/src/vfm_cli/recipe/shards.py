"""What the shards hold, read through vfm-data before the model is built: the trust check, the
dataset folders of a blend (``vfm_data.blend_file``) and each dataset's first sample
(``vfm_data.sample.first_sample``). vfm-data's errors become :class:`ConfigError` naming the key."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vfm_parallel.trainer.config import ConfigError, TrainConfig


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
    captioned: bool = False  # a dataset's first sample has a caption (not `vfm shard --no-require-captions` footage)


def data_available(cfg: TrainConfig) -> bool:
    """Whether the shards the config names are on this machine (a blend file or the folders)."""
    if cfg.data.source == "synthetic":
        return True
    return Path(cfg.data.blend).is_file() if cfg.data.blend else all(Path(p).is_dir() for p in cfg.data.shards)


def check_trusted(cfg: TrainConfig) -> None:
    """The blend or shard folders hold only metadata vfm writes (docs/security.md), unless the
    config trusts their code; before anything (energon included) reads them further."""
    from vfm_data.trust import DatasetNotFoundError, UntrustedDatasetError, check_dataset

    key = "data.blend" if cfg.data.blend else "data.shards"
    try:
        for path in [cfg.data.blend] if cfg.data.blend else cfg.data.shards:
            check_dataset(path, trust_dataset_code=cfg.data.trust_dataset_code)
    except (UntrustedDatasetError, DatasetNotFoundError) as exc:
        raise ConfigError(key, str(exc)) from None


def dataset_folders(cfg: TrainConfig) -> list[Path]:
    """The prepared dataset folders of ``data.blend`` (an energon metadataset v2) or ``data.shards``."""
    if not cfg.data.blend:
        return [Path(p) for p in cfg.data.shards]
    from vfm_data.blend_file import BlendFileError, dataset_folders as blend_folders

    try:
        return blend_folders(cfg.data.blend)
    except BlendFileError as exc:
        raise ConfigError("data.blend", str(exc)) from None


def _first_sample(folder: Path) -> tuple[tuple[int, ...], tuple[int, ...], dict]:
    """(latent shape, text shape, metadata) of the first decodable sample in ``folder``."""
    from vfm_data.errors import ShardError
    from vfm_data.sample import first_sample

    try:
        sample = first_sample(folder)
    except ShardError as exc:
        raise ConfigError("data", str(exc)) from None
    return tuple(sample.latent.shape), tuple(sample.text.shape), sample.meta


def probe_shards(cfg: TrainConfig) -> ShardInfo:
    """The datasets' first samples, after the trust check; the datasets must agree on channels and text width."""
    check_trusted(cfg)
    folders = dataset_folders(cfg)
    samples = [_first_sample(f) for f in folders]
    text_dims = {text[1] for _, text, _ in samples}
    channels = {latent[0] for latent, _, _ in samples}
    if len(text_dims) > 1 or len(channels) > 1:
        raise ConfigError("data", f"the datasets disagree: latent channels {sorted(channels)}, text widths {sorted(text_dims)}")
    meta = samples[0][2]
    extra = meta.get("extra") or {}
    options = {}
    for section in ("tokenizer_options", "text_encoder_options"):
        value = extra.get(section) or {}
        if not isinstance(value, dict):
            raise ConfigError("data", f"{folders[0]}: the first sample's metadata extra.{section} must be an object "
                                      f"(option names to values), got {type(value).__name__}")
        options[section] = dict(value)
    return ShardInfo(folders, [s[0] for s in samples], text_dims.pop(), meta.get("tokenizer", ""), meta.get("text_encoder", ""),
                     options["tokenizer_options"], options["text_encoder_options"],
                     text_len=int(meta.get("text_length") or samples[0][1][0]),
                     captioned=any(str(m.get("caption") or "").strip() for _, _, m in samples))


#: The config keys that name what a shard records under each options section.
_OWN_KEY = {"tokenizer_options": ("model.tokenizer", "tokenizer"), "text_encoder_options": ("model.text_encoder", "text encoder")}


def recorded_options(info: ShardInfo, section: str) -> dict:
    """The ``tokenizer_options`` or ``text_encoder_options`` the shards record, for a config that names
    no tokenizer / text encoder of its own. Shards are data (docs/security.md): every path in them must
    resolve, links followed, inside the dataset folder the sample came from, and a folder there holds
    no link leading out; the paths come back absolute, ``allow_torchscript`` dropped. Else a
    :class:`ConfigError` names the key, the path and how to name the encoder yourself."""
    from vfm_models.export_paths import ExportPathError, check_data_paths

    key, what = _OWN_KEY[section]
    try:
        return check_data_paths(
            info.datasets[0], {section: getattr(info, section)}, file="the shards' sample metadata: extra",
            inside="the dataset folder", advice=f"shards are data and cannot name files elsewhere: name the {what} "
            f"yourself in {key} and {key}_options (your config is trusted), or copy its files into the dataset folder",
        )[section]
    except ExportPathError as exc:
        raise ConfigError(f"{key}_options", str(exc)) from None
