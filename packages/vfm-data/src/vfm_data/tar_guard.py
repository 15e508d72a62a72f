"""Reading shards without letting a damaged tar end the loader in a traceback.

energon reads a sample's tar members through its indexed tar reader; a truncated tail or a damaged
header raises ``tarfile.ReadError`` out of its iterator, which ends the whole pipeline naming no
shard. :func:`guard_readers` wraps each reader of a built energon dataset so that:

- a sample whose members cannot be read (a truncated tail, a damaged header inside the shard) comes
  out as an *unreadable* raw sample, which the decoder skips and counts like any undecodable one;
- a shard that is not a tar from byte 0 (garbage, empty) is a :class:`~vfm_data.errors.ShardError`
  naming it: nothing in it can be read, whatever its index says;
- so is a shard rewritten after its folder was prepared (:mod:`vfm_data.stale_index`): its index
  points into other bytes, so the error says to prepare the folder again.

It also tells the :class:`~vfm_data.skips.SkipLog` how many samples of each shard the stream reads
per pass, which the "shard with no decodable sample" rule needs.
"""

from __future__ import annotations

import os
import stat
import tarfile
from bisect import bisect_right
from pathlib import Path
from typing import Any, Iterator

from megatron.energon.errors import SYSTEM_EXCEPTIONS
from megatron.energon.source_info import SourceInfo

from vfm_data.errors import ShardError
from vfm_data.foreign import prepare_commands
from vfm_data.skips import SkipLog, shard_label
from vfm_data.stale_index import stale_index_problem

#: The raw-sample entry that marks a sample whose tar members could not be read (its text: why).
UNREADABLE = "__vfm_unreadable__"
_BLOCK = tarfile.BLOCKSIZE


def tar_head_problem(path: Any) -> str | None:
    """Why the file at ``path`` is not a tar from its first byte, or None if its first header reads."""
    try:  # a named pipe (opening it waits for a writer forever) or a device is no shard: never opened
        if not stat.S_ISREG(os.stat(str(path)).st_mode):
            return "is not a regular file (a named pipe, a device or a folder)"
        with open(str(path), "rb") as f:
            head = f.read(_BLOCK)
    except OSError as exc:
        return f"cannot be opened ({type(exc).__name__}: {exc})"
    if len(head) < _BLOCK:
        return f"is {len(head)} bytes long, shorter than one tar header ({_BLOCK} bytes)"
    if head == bytes(_BLOCK):
        return "starts with an end-of-archive block (an empty tar)"
    try:
        tarfile.TarInfo.frombuf(head, "utf-8", "surrogateescape")
    except tarfile.HeaderError as exc:
        return f"does not start with a tar header ({exc})"
    return None


def _member_key(path: Any, offset: int) -> str | None:
    """The sample key of the tar header at ``offset``, if one can be read there."""
    try:
        with open(str(path), "rb") as f:
            f.seek(offset)
            info = tarfile.TarInfo.frombuf(f.read(_BLOCK), "utf-8", "surrogateescape")
        return info.name.rsplit("/", 1)[-1].split(".", 1)[0] or None
    except (OSError, tarfile.HeaderError, ValueError):
        return None


def _file_size(path: Any) -> int | None:
    try:
        with open(str(path), "rb") as f:
            return f.seek(0, 2)
    except OSError:
        return None


class GuardedReader:
    """An energon ``ShardInfosITarReader`` whose failed reads become unreadable samples."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self._bad_heads: dict[int, str | None] = {}  # shard index -> tar_head_problem (checked once)
        self._stale: dict[int, str | None] = {}  # shard index -> stale_index_problem (checked once)

    def __getattr__(self, name: str) -> Any:  # everything else is the wrapped reader's
        if name == "reader":  # not set yet (e.g. while unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.reader, name)

    def __len__(self) -> int:
        return len(self.reader)

    def __getitem__(self, idx: int) -> Any:
        try:
            return self.reader[idx]
        except SYSTEM_EXCEPTIONS:
            raise
        except Exception as exc:  # tarfile.ReadError, "Unexpected end of tar file", OSError, ...
            return self._unreadable(idx, exc)

    def samples_of(self, label: str) -> Iterator[Any]:
        """Every raw sample of the shard called ``label`` (see :func:`~vfm_data.skips.shard_label`)."""
        reader = self.reader
        for i, info in enumerate(reader.shard_infos):
            if shard_label(reader.base_path, info.name) == label:
                for idx in range(reader.shard_count_cumsum[i], reader.shard_count_cumsum[i + 1]):
                    raw = self[idx]
                    if raw is not None:  # None: excluded by the dataset's split config
                        yield raw

    def _unreadable(self, idx: int, exc: Exception) -> dict:
        reader = self.reader
        shard_idx = bisect_right(reader.shard_count_cumsum, idx) - 1
        info = reader.shard_infos[shard_idx]
        label = shard_label(reader.base_path, info.name)
        if shard_idx not in self._bad_heads:
            self._bad_heads[shard_idx] = tar_head_problem(info.path)
        if self._bad_heads[shard_idx] is not None:
            raise ShardError(f"vfm_data: shard {label} {self._bad_heads[shard_idx]}: it is not a readable tar "
                             f"file; re-write it or remove it from the dataset") from exc
        if shard_idx not in self._stale:
            self._stale[shard_idx] = stale_index_problem(info.path)
        if self._stale[shard_idx] is not None:  # every read of it fails or reads the wrong bytes: stop, say why
            folder = Path(str(info.path)).parent
            raise ShardError(f"vfm_data: shard {label} changed after its folder was prepared: {self._stale[shard_idx]}. "
                             f"Prepare the folder again ({prepare_commands(folder)}; give the split_parts it was "
                             "prepared with), then start the loader again") from exc
        index_in_shard = idx - reader.shard_count_cumsum[shard_idx]
        key, reason = f"#{index_in_shard}", "unreadable"
        detail = f"{type(exc).__name__}: {exc}"
        try:
            pointer = reader._get_itar_sample_pointer(idx)
            key = _member_key(info.path, pointer.byte_offset) or key
            size = _file_size(info.path)
            if size is not None and size < pointer.byte_offset + pointer.byte_size:
                reason = "truncated"
                detail += (f"; the shard is {size} bytes, its index puts this sample at bytes "
                           f"{pointer.byte_offset}..{pointer.byte_offset + pointer.byte_size}")
        except Exception:  # the index itself is unreadable: keep what we have
            pass
        return {
            "__key__": key,
            "__shard__": info.name,
            "__restore_key__": ("Webdataset", idx),
            "__sources__": (SourceInfo(dataset_path=reader.base_path, index=idx, shard_name=info.name, file_names=()),),
            UNREADABLE: (reason, detail),
        }


def _walk(dataset: Any, seen: set[int]) -> Iterator[Any]:
    """Every dataset in an energon wrapper tree (wrappers keep their inputs in ``datasets``)."""
    if dataset is None or id(dataset) in seen:
        return
    seen.add(id(dataset))
    yield dataset
    for inner in getattr(dataset, "datasets", ()) or ():
        yield from _walk(inner, seen)


def _owned_per_shard(loader: Any, reader: Any) -> dict[str, int]:
    """Samples of each shard in this stream's slices (energon runs a stream as its only worker)."""
    if len(loader.workers_slice_offsets) != 1:
        return {}
    offsets = list(loader.workers_slice_offsets[0])
    cumsum, owned = reader.shard_count_cumsum, {}
    for start, end in zip(offsets[:-1], offsets[1:]):
        i = max(0, bisect_right(cumsum, start) - 1)
        while i < len(reader.shard_infos) and cumsum[i] < end:
            n = min(end, cumsum[i + 1]) - max(start, cumsum[i])
            if n > 0:
                label = shard_label(reader.base_path, reader.shard_infos[i].name)
                owned[label] = owned.get(label, 0) + n
            i += 1
    return owned


def guard_readers(dataset: Any, skips: SkipLog) -> list[GuardedReader]:
    """Wrap the tar readers of a built energon dataset; returns the wrapped readers."""
    wrapped: list[GuardedReader] = []
    for ds in _walk(dataset, set()):
        readers = getattr(ds, "join_readers", None)
        if not readers:
            continue
        ds.join_readers = [r if isinstance(r, GuardedReader) or not hasattr(r, "shard_count_cumsum")
                           else GuardedReader(r) for r in readers]
        wrapped += [r for r in ds.join_readers if isinstance(r, GuardedReader)]
        if len(ds.join_readers) == 1 and isinstance(ds.join_readers[0], GuardedReader):
            skips.add_shards(_owned_per_shard(ds, ds.join_readers[0].reader))
    return wrapped
