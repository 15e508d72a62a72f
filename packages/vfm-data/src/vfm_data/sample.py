"""The typed sample and the cooker that decodes a raw shard entry into it, skipping bad data.

Bad data (a corrupt tar member, a missing key, a wrong dtype or rank) is skipped and counted, with
a warning naming the shard and the key. A latent whose channel count disagrees with the model is an
error, not a skip: it means the whole dataset was made for another model.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from typing import Any

import torch
from megatron.energon import Sample, SkipSample, edataclass
from megatron.energon.errors import FatalSampleError

from vfm_data.format import FLOAT_DTYPES, LATENT_PARTS, META_PART, TEXT_PARTS, SampleMeta, decode_array


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


class ChannelMismatchError(FatalSampleError):
    """The latent has another channel count than the model expects."""


class SampleDecoder:
    """Turns energon's crude sample (raw bytes per tar member) into a :class:`VideoSample`.

    ``counts`` records what was skipped, by reason (``corrupt``, ``missing_key``, ``dtype``, ``shape``).
    """

    def __init__(self, latent_channels: int | None = None) -> None:
        self.latent_channels = latent_channels
        self.counts: Counter[str] = Counter()

    def _skip(self, reason: str, raw: dict, key: str, detail: str) -> None:
        self.counts[reason] += 1
        warnings.warn(
            f"vfm_data: skipped sample {raw.get('__key__')!r} of shard {raw.get('__shard__', '?')!r}: "
            f"{reason} in member {key!r} ({detail}); {reason} skips so far: {self.counts[reason]}",
            stacklevel=2,
        )
        raise SkipSample()

    def _part(self, raw: dict, parts: tuple[str, ...]) -> tuple[str, bytes]:
        for part in parts:
            if part in raw:
                return part, raw[part]
        self._skip("missing_key", raw, "|".join(parts), f"sample has {sorted(k for k in raw if not k.startswith('__'))}")
        raise AssertionError  # unreachable

    def _array(self, raw: dict, parts: tuple[str, ...], ndim: int) -> tuple[torch.Tensor, int]:
        part, data = self._part(raw, parts)
        try:
            value = decode_array(data, part.rsplit(".", 1)[1])
        except Exception as exc:  # truncated / garbage bytes, pickled objects, ...
            self._skip("corrupt", raw, part, f"{type(exc).__name__}: {exc}")
        if value.dtype not in FLOAT_DTYPES:
            self._skip("dtype", raw, part, f"dtype {value.dtype}, accepted {[str(d) for d in FLOAT_DTYPES]}")
        if value.ndim != ndim:
            self._skip("shape", raw, part, f"rank {value.ndim} shape {tuple(value.shape)}, expected rank {ndim}")
        return value, len(data)

    def __call__(self, raw: dict[str, Any]) -> VideoSample:
        latent, n_latent = self._array(raw, LATENT_PARTS, 4)
        text, n_text = self._array(raw, TEXT_PARTS, 2)
        _, meta_bytes = self._part(raw, (META_PART,))
        try:
            meta = SampleMeta.from_json(json.loads(meta_bytes)).to_json()
        except Exception as exc:
            self._skip("corrupt", raw, META_PART, f"{type(exc).__name__}: {exc}")
        if self.latent_channels is not None and latent.shape[0] != self.latent_channels:
            raise ChannelMismatchError(
                f"sample {raw.get('__key__')!r} of shard {raw.get('__shard__', '?')!r}: latent has "
                f"{latent.shape[0]} channels but the model expects {self.latent_channels}"
            )
        length = int(meta["text_length"]) or text.shape[0]
        return VideoSample(
            __key__=raw["__key__"],
            __restore_key__=raw["__restore_key__"],
            __subflavors__=raw.get("__subflavors__"),
            __sources__=raw.get("__sources__"),
            latent=latent,
            text=text,
            text_length=min(length, text.shape[0]),
            meta=meta,
            nbytes=n_latent + n_text + len(meta_bytes),
        )
