"""The shard format: which tar members make up a sample and what its JSON metadata holds.

A sample ``<key>`` in a shard (docs/design.md section 5):

- ``<key>.latent.npy`` or ``<key>.latent.pth``: the video latent, (C, T, H, W); images have T = 1.
- ``<key>.text.npy`` or ``<key>.text.pth``: text-encoder embeddings, (L, D); only the first
  ``meta["text_length"]`` rows are real tokens, the rest is padding.
- ``<key>.json``: :class:`SampleMeta` as a JSON object, with the shard format's ``format_version``.
"""

from __future__ import annotations

import dataclasses
import io
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from vfm_plugins.archives import check_stored_zip
from vfm_plugins.formats import FormatVersionError, check_format_version

#: The tar member suffixes (energon "parts") of one sample.
LATENT_PARTS = ("latent.npy", "latent.pth")
TEXT_PARTS = ("text.npy", "text.pth")
META_PART = "json"
#: Floating dtypes accepted for latents and text embeddings.
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
MODALITIES = ("image", "video")
#: ``format_version`` in every ``<key>.json``: bumped when an older vfm would misread a sample (a member or
#: key changing meaning), not for a key an older vfm may ignore (those go in ``extra``). A sample without it
#: (written before the field) is format 1. Per sample, not per folder: a blend mixes folders of any writer.
SAMPLE_FORMAT = 1


class SampleFormatError(FormatVersionError):
    """A sample written in a shard format this vfm does not read: not skipped as corrupt (every sample of
    that writer would be) but an error that stops the loader, naming the shard and the upgrade."""


@dataclass
class SampleMeta:
    """The JSON metadata of one sample (``<key>.json``)."""

    source: str  # path or URL of the source video / image
    span: tuple[float, float]  # (start, end) seconds in the source; (0, 0) for images
    fps: float
    size: tuple[int, int]  # (height, width) in pixels of the clip before tokenizing
    caption: str
    modality: str  # "image" | "video"
    tokenizer: str  # id of the video tokenizer that made the latent
    text_encoder: str  # id of the text encoder that made the text embedding
    text_length: int = 0  # real tokens in the text embedding; set by the writer when 0
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Shards are data written by anyone: every field is checked, each error names the field.
        for name in ("source", "caption", "tokenizer", "text_encoder"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"metadata {name} must be a string, got {getattr(self, name)!r}")
        if self.modality not in MODALITIES:
            raise ValueError(f"modality must be one of {MODALITIES}, got {self.modality!r}")
        self.span = _numbers("span", self.span, float)  # type: ignore[assignment]
        self.size = _numbers("size", self.size, int)  # type: ignore[assignment]
        self.fps = _numbers("fps", [self.fps], float, count=1)[0]
        if isinstance(self.text_length, bool) or not isinstance(self.text_length, (int, np.integer)) or self.text_length < 0:
            raise ValueError(f"metadata text_length must be an integer >= 0 (0: all rows), got {self.text_length!r}")
        self.text_length = int(self.text_length)
        if not isinstance(self.extra, dict):
            raise ValueError(f"metadata extra must be an object, got {type(self.extra).__name__}")

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["span"], out["size"] = list(self.span), list(self.size)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "SampleMeta":
        """From a parsed ``<key>.json``; a missing or mistyped field is a ``KeyError`` / ``ValueError`` naming it."""
        if not isinstance(data, dict):
            raise ValueError(f"metadata must be a JSON object, got {type(data).__name__}")
        # first: a newer sample's keys may mean something else
        check_format_version(data.get("format_version"), where="its metadata", what="vfm shard sample",
                             current=SAMPLE_FORMAT, package="vfm-data", missing=1, error=SampleFormatError)
        names = {f.name for f in dataclasses.fields(cls)}
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in data and f.name not in ("text_length", "extra")]
        if missing:
            raise KeyError(f"metadata lacks {', '.join(missing)}; required: {', '.join(sorted(names - {'extra'}))}")
        return cls(**{k: v for k, v in data.items() if k in names})


def _numbers(name: str, value: Any, kind: type, count: int = 2) -> tuple:
    """``count`` finite numbers (not bools, not strings) converted to ``kind``, or a ValueError naming ``name``."""
    ok = isinstance(value, (list, tuple)) and len(value) == count and all(
        isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and np.isfinite(v) for v in value)
    if not ok:
        raise ValueError(f"metadata {name} must be {count} finite number{'s' if count > 1 else ''}, got {value!r}")
    return tuple(kind(v) for v in value)


def encode_array(value: torch.Tensor | np.ndarray, fmt: str) -> bytes:
    """Serialize a tensor as ``npy`` (numpy, no pickle) or ``pth`` (torch.save of a plain tensor)."""
    tensor = torch.as_tensor(value)
    if fmt == "npy":
        if tensor.dtype == torch.bfloat16:
            raise ValueError("npy cannot hold bfloat16; write with fmt='pth' or cast to float16/float32")
        buf = io.BytesIO()
        np.save(buf, tensor.detach().cpu().numpy(), allow_pickle=False)
        return buf.getvalue()
    if fmt == "pth":
        buf = io.BytesIO()
        torch.save(tensor.detach().cpu().contiguous().clone(), buf)
        return buf.getvalue()
    raise ValueError(f"array format must be 'npy' or 'pth', got {fmt!r}")


def decode_array(data: bytes, fmt: str) -> torch.Tensor:
    """Inverse of :func:`encode_array`; never unpickles (``allow_pickle=False`` / ``weights_only``)."""
    if fmt == "npy":
        _check_npy_size(data)
        return torch.from_numpy(np.load(io.BytesIO(data), allow_pickle=False))
    if fmt == "pth":
        _check_stored(data)
        value = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"expected a tensor, found {type(value).__name__}")
        if not value.is_contiguous() or value.numel() * value.element_size() > value.untyped_storage().nbytes():
            # a stride-0 view: 1.5 KB of member decoded as a 160 GB tensor
            raise ValueError(f"a {tuple(value.shape)} tensor over {value.untyped_storage().nbytes()} stored bytes (stride "
                             f"{value.stride()}); accepted: a contiguous tensor whose values are all stored (torch.save of "
                             "tensor.contiguous().clone())")
        return value
    raise ValueError(f"array format must be 'npy' or 'pth', got {fmt!r}")


def _check_npy_size(data: bytes) -> None:
    """An ``.npy`` member's header must describe the bytes that follow it: numpy reserves the memory
    of the shape the header declares before reading (a 200-byte member declaring 3 billion floats
    asked for 12 GB)."""
    buf = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(buf)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read_header(buf)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not an .npy array: {exc}") from exc
    count = math.prod(int(dim) for dim in shape)
    stored = len(data) - buf.tell()
    if dtype.hasobject or count * dtype.itemsize != stored:
        raise ValueError(f"an .npy header declaring {tuple(shape)} {dtype} ({count * dtype.itemsize} bytes) over "
                         f"{stored} stored bytes; accepted: an array whose values are all stored (np.save)")


def _check_stored(data: bytes) -> None:
    """A ``.pth`` archive's records must be stored, not compressed: torch.save stores them, and a
    deflated record decompresses up to 1000x (a 100 KB member into a 100 MB tensor)."""
    check_stored_zip(data)  # torch's legacy (non-zip) format passes: its tensor bytes are all in the member
