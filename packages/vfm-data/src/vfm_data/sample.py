"""The typed sample and the cooker that decodes a raw shard entry into it, skipping bad data.

Bad data (an unreadable or corrupt tar member, a missing key, a wrong dtype or rank, metadata that
is not what :class:`~vfm_data.format.SampleMeta` accepts) is skipped and counted by the stream's
:class:`~vfm_data.skips.SkipLog`, which names the shard and the key and stops the loader when a
shard or the stream has nothing decodable. A latent whose channel count disagrees with the model is
an error, not a skip: it means the whole dataset was made for another model.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any, NoReturn

import torch
from megatron.energon import Sample, SkipSample, edataclass
from megatron.energon.source_info import SourceInfo

from vfm_data.errors import DataError, ShardError
from vfm_data.foreign import member_parts, raw_media_hint, unprepared_hint
from vfm_data.format import (FLOAT_DTYPES, LATENT_PARTS, META_PART, TEXT_PARTS, SampleFormatError, SampleMeta,
                             decode_array)
from vfm_data.skips import SkipLog, shard_label
from vfm_data.tar_guard import UNREADABLE, tar_head_problem


@edataclass
class VideoSample(Sample):
    """One decoded sample. Images are 1-frame videos."""

    latent: torch.Tensor  # (C, T, H, W)
    text: torch.Tensor  # (L, D), first text_length rows are real
    text_length: int
    meta: dict  # SampleMeta.to_json()
    nbytes: int  # bytes read from the shard for this sample
    num_tokens: int = 0  # patch tokens, set by the task encoder
    grid: tuple = ()  # (T', H', W') patch grid, set by the task encoder


class ShardFormatError(ShardError, SampleFormatError):
    """A sample in a shard format this vfm does not read (a newer writer's): stops the loader, naming the
    shard, the sample, the version and the upgrade."""


class ChannelMismatchError(DataError):
    """The latent has another channel count than the model expects."""


def shard_of(raw: dict) -> str:
    """The shard label (dataset folder / file name) of a raw or decoded sample."""
    sources = raw.get("__sources__") if isinstance(raw, dict) else getattr(raw, "__sources__", None)
    for source in sources or ():
        if getattr(source, "shard_name", None):
            return shard_label(source.dataset_path, source.shard_name)
    return str(raw.get("__shard__", "?")) if isinstance(raw, dict) else "?"


class SampleDecoder:
    """Turns energon's crude sample (raw bytes per tar member) into a :class:`VideoSample`.

    ``counts`` records what was skipped, by reason (``unreadable``, ``truncated``, ``corrupt``,
    ``missing_key``, ``dtype``, ``shape``) and by ``reason@shard``; see :mod:`vfm_data.skips`.
    """

    def __init__(self, latent_channels: int | None = None, skips: SkipLog | None = None) -> None:
        self.latent_channels = latent_channels
        self.skips = skips if skips is not None else SkipLog()

    @property
    def counts(self):
        return self.skips.counts

    def _skip(self, reason: str, raw: dict, member: str, detail: str) -> NoReturn:
        self.skips.skip(reason, shard=shard_of(raw), key=str(raw.get("__key__")), member=member, detail=detail)

    def _part(self, raw: dict, parts: tuple[str, ...]) -> tuple[str, bytes]:
        for part in parts:
            if part in raw:
                return part, raw[part]
        has = sorted(k for k in raw if not k.startswith("__"))
        media = raw_media_hint(has) if parts == LATENT_PARTS else ""
        self._skip("missing_key", raw, "|".join(parts), f"sample has {has}" + (f"; {media}" if media else ""))

    def _array(self, raw: dict, parts: tuple[str, ...], ndim: int) -> tuple[torch.Tensor, int]:
        part, data = self._part(raw, parts)
        try:
            value = decode_array(data, part.rsplit(".", 1)[1])
        except Exception as exc:  # truncated / garbage bytes, pickled objects, ...
            self._skip("corrupt", raw, part, f"{type(exc).__name__}: {exc}")
        if value.dtype not in FLOAT_DTYPES:
            self._skip("dtype", raw, part, f"dtype {value.dtype}, accepted {[str(d) for d in FLOAT_DTYPES]}")
        if value.ndim != ndim or 0 in value.shape:
            self._skip("shape", raw, part, f"shape {tuple(value.shape)}, expected {ndim} dimensions, none empty")
        return value, len(data)

    def __call__(self, raw: dict[str, Any]) -> VideoSample:
        try:
            return self._decode(raw)
        except (SkipSample, DataError):
            raise
        except Exception as exc:  # anything else the bytes provoke is a corrupt sample, not a crash
            self._skip("corrupt", raw, "?", f"{type(exc).__name__}: {exc}")

    def _decode(self, raw: dict[str, Any]) -> VideoSample:
        if UNREADABLE in raw:  # the tar members could not be read (see vfm_data.tar_guard)
            reason, detail = raw[UNREADABLE]
            self._skip(reason, raw, "", detail)
        latent, n_latent = self._array(raw, LATENT_PARTS, 4)
        text, n_text = self._array(raw, TEXT_PARTS, 2)
        _, meta_bytes = self._part(raw, (META_PART,))
        try:
            meta = SampleMeta.from_json(json.loads(meta_bytes)).to_json()
        except SampleFormatError as exc:  # a newer writer's: skipped as corrupt, its every sample would go
            raise ShardFormatError(f"shard {shard_of(raw)}, sample {raw.get('__key__')!r}: {exc}") from None
        except Exception as exc:
            self._skip("corrupt", raw, META_PART, f"{type(exc).__name__}: {exc}")
        if meta["text_length"] > text.shape[0]:
            self._skip("shape", raw, META_PART, f"text_length {meta['text_length']} > {text.shape[0]} rows of the text embedding")
        if self.latent_channels is not None and latent.shape[0] != self.latent_channels:
            raise ChannelMismatchError(
                f"sample {raw.get('__key__')!r} of shard {shard_of(raw)}: latent has "
                f"{latent.shape[0]} channels but the model expects {self.latent_channels}"
            )
        self.skips.decoded(shard_of(raw))
        return VideoSample(
            __key__=raw["__key__"],
            __restore_key__=raw["__restore_key__"],
            __subflavors__=raw.get("__subflavors__"),
            __sources__=raw.get("__sources__"),
            latent=latent,
            text=text,
            text_length=meta["text_length"] or text.shape[0],
            meta=meta,
            nbytes=n_latent + n_text + len(meta_bytes),
        )


def _raw_samples(shard: Path):
    """(key, members) of one shard in file order, read with tarfile."""
    key, parts = None, {}
    with tarfile.open(shard, "r") as tar:
        for member in tar:
            if not member.isfile():
                continue
            member_key, _, part = member.name.rsplit("/", 1)[-1].partition(".")
            if key is not None and member_key != key:
                yield key, parts
                parts = {}
            key = member_key
            parts[part] = tar.extractfile(member).read()
    if key is not None:
        yield key, parts


def first_sample(folder: str | Path, *, max_tries: int = 100, warn: bool = True) -> VideoSample:
    """The first decodable sample of a prepared dataset folder, in shard and file order.

    What a job needs to know before it builds the model (latent and text shapes, tokenizer ids).
    Undecodable samples are skipped and warned as the loader does; a damaged tail ends its shard; a
    shard that is not a tar, or ``max_tries`` samples without a decodable one, is a
    :class:`~vfm_data.errors.ShardError` naming the shards. ``warn=False``: skips are only counted.
    """
    folder = Path(folder)
    shards = sorted(folder.glob("*.tar")) if folder.is_dir() else []
    if not shards or not (folder / ".nv-meta").is_dir():
        raise ShardError(f"vfm_data: {unprepared_hint(folder)}" if shards else
                         f"vfm_data: {folder} is not a prepared shard folder (needs *.tar shards and .nv-meta/; "
                         f"vfm shard or vfm_data.prepare_dataset writes both)")
    for shard in shards:  # a shard folder from someone else may link to files elsewhere on this machine
        if not shard.resolve().is_relative_to(folder.resolve()):
            raise ShardError(
                f"vfm_data: shard {shard_label(folder, shard.name)} is a link to {shard.resolve()}, outside the dataset "
                f"folder; accepted: shard files inside it (name other folders in a blend file, or copy it with cp -rL)")
    decoder = SampleDecoder(skips=SkipLog(max_consecutive=max_tries, warn=warn))
    for shard in shards:
        problem = tar_head_problem(shard)
        if problem:
            raise ShardError(f"vfm_data: shard {shard_label(folder, shard.name)} {problem}: it is not a readable "
                             f"tar file; re-write it or remove it from the dataset")
        source = (SourceInfo(dataset_path=folder, index=0, shard_name=shard.name, file_names=()),)
        samples, after = _raw_samples(shard), "the start"
        while True:
            try:
                key, parts = next(samples)
            except StopIteration:
                break
            except (tarfile.TarError, OSError, EOFError) as exc:  # a damaged tail: count it, next shard
                raw = {"__key__": f"(after {after})", "__sources__": source,
                       UNREADABLE: ("unreadable", f"{type(exc).__name__}: {exc}")}
                parts, key = None, None
            try:
                if parts is None:
                    decoder(raw)
                return decoder({"__key__": key, "__restore_key__": (), "__sources__": source, **parts})
            except SkipSample:
                if parts is None:
                    break
                after = repr(key)
    media = raw_media_hint(member_parts(shards[0]))
    raise ShardError(f"vfm_data: no decodable sample in {folder} ({decoder.skips.summary()})" + (f"; {media}" if media else ""))
