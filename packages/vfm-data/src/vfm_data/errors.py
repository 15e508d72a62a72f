"""Errors that stop loading: data vfm cannot train on, each a one-line message naming the shards.

They derive from energon's ``FatalSampleError``, which energon never hands to an error handler, so
they end the pipeline instead of being skipped. Energon wraps them on the way out (in another
``FatalSampleError`` whose message is the whole sample); :func:`data_error_in` finds ours again.
"""

from __future__ import annotations

from typing import Any

from megatron.energon.errors import FatalSampleError
from vfm_plugins import Notice, printable


class DataError(FatalSampleError):
    """Data that cannot be trained on. The message is one line naming the shards (and samples)."""

    def __init__(self, message: str) -> None:  # one argument: pickles into the main process as is
        super().__init__(one_line(message))  # it names data: made one printable line here, for every raiser


class ShardError(DataError):
    """A shard that cannot be read, or a shard or loader stream with no usable sample."""


class DataWarning(Notice):
    """Data the loader went on from: samples skipped, cropped, a position restored under other settings,
    dataset code trusted (``vfm train`` shows each as one ``warning:`` line)."""


class SampleError(DataError):
    """An unexpected error while preparing a sample (not a decode error: those are skipped)."""


def data_error_in(exc: BaseException) -> DataError | None:
    """The :class:`DataError` that ``exc`` is or was raised while handling, if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, DataError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def one_line(text: object) -> str:
    """A message naming data (sample keys, shard and member names, decoder errors) made safe to print
    wherever it is printed, worker processes included: :func:`vfm_plugins.printable` (control
    characters, bidi controls as ``\\x1b``-style escapes) and newlines and tabs escaped too, so a name
    cannot add a line."""
    return printable(text).replace("\n", "\\n").replace("\t", "\\t")


def _source_text(sources: Any) -> str:
    for source in sources or ():
        shard = getattr(source, "shard_name", None)
        if shard:
            return f" of shard {str(getattr(source, 'dataset_path', '')).rstrip('/')}/{shard}"
    return ""


def raise_sample_error(exc: Exception, sample: Any, sources: Any = None) -> None:
    """energon's ``global_error_handler`` for vfm streams.

    vfm's cooker skips (and counts) every undecodable sample itself, so an exception reaching energon
    is a bug or data that passed decoding and still broke a later stage: it stops the run with one
    line naming the sample, instead of energon's default (a traceback and the sample printed per
    failure, up to 100 in a row).
    """
    key = sample.get("__key__") if isinstance(sample, dict) else getattr(sample, "__key__", None)
    if isinstance(sample, list):
        key = [getattr(s, "__key__", None) for s in sample[:4]]
    raise SampleError(
        f"vfm_data: sample {key!r}{_source_text(sources)} failed: {type(exc).__name__}: {exc}"
    ) from exc
