"""Write samples into WebDataset tar shards, then prepare them for energon with energon's own API.

Shards roll over once they reach ``max_shard_bytes``. Each shard is written to a hidden temporary
name in the same folder and renamed when complete, so a crash never leaves a half-written shard under
a final name (the rename is atomic on POSIX file systems).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import tarfile
from glob import escape as glob_escape
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
import yaml
from vfm_plugins.files import rename_into_place, replace_file, temporary_file

from vfm_data.energon_tools import write_tools_config
from vfm_data.format import FLOAT_DTYPES, SAMPLE_FORMAT, SampleMeta, encode_array

_KEY_RE = re.compile(r"^[A-Za-z0-9_\-]+$")
#: dataset.yaml of a vfm dataset: energon's crude webdataset, cooked by vfm_data's task encoder.
DATASET_YAML = {"__module__": "megatron.energon", "__class__": "CrudeWebdataset"}


def member_mtime() -> int:
    """The time stamp of every tar member: ``SOURCE_DATE_EPOCH`` when set (the reproducible-builds
    convention), else 0. Not the clock: the same samples then make the same bytes, so a shard's
    checksum says whether its data changed."""
    value = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not value:
        return 0
    try:
        stamp = int(value)
    except ValueError:
        stamp = -1
    if stamp < 0:
        raise ValueError(f"SOURCE_DATE_EPOCH={value!r} is not a time stamp: give whole seconds since 1970 (>= 0), "
                         "or unset it for shard members stamped 0")
    return stamp


class ShardWriter:
    """Append samples to ``<folder>/<prefix>-NNNNNN.tar`` shards.

    >>> with ShardWriter(folder, max_shard_bytes=1 << 30) as w:
    ...     w.write("clip0", latent, text, meta)       # latent (C,T,H,W), text (L,D)
    >>> prepare_dataset(folder)                         # energon .nv-meta/
    """

    def __init__(
        self,
        folder: str | os.PathLike,
        *,
        prefix: str = "shard",
        max_shard_bytes: int = 1 << 30,
        array_format: str = "npy",
        start_index: int = 0,
    ) -> None:
        if array_format not in ("npy", "pth"):
            raise ValueError(f"array_format must be 'npy' or 'pth', got {array_format!r}")
        if max_shard_bytes <= 0:
            raise ValueError(f"max_shard_bytes must be positive, got {max_shard_bytes}")
        self._mtime = member_mtime()
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        self.max_shard_bytes = max_shard_bytes
        self.array_format = array_format
        self.shards: list[Path] = []  # completed shards, in order
        self._index = start_index
        self._tar: tarfile.TarFile | None = None
        self._tmp: Path | None = None
        self._bytes = 0
        self._keys: set[str] = set()

    # --- writing -------------------------------------------------------------------------------

    def write(
        self,
        key: str,
        latent: torch.Tensor | np.ndarray,
        text: torch.Tensor | np.ndarray,
        meta: SampleMeta | dict,
    ) -> None:
        """Append one sample. ``latent`` (C, T, H, W), ``text`` (L, D); images have T = 1."""
        if not _KEY_RE.match(key):
            raise ValueError(f"sample key {key!r} may only contain letters, digits, '_' and '-' (no dots or slashes)")
        if key in self._keys:
            raise ValueError(f"sample key {key!r} was written twice; energon needs unique keys")
        meta = meta if isinstance(meta, SampleMeta) else SampleMeta.from_json(meta)
        if text is None or (hasattr(text, "shape") and len(text.shape) == 2 and text.shape[0] == 0):
            raise ValueError(f"sample {key!r} has no text embedding; every sample needs one, (L, D) with L >= 1: for an "
                             "unconditional sample write the empty caption's embedding (what `vfm shard "
                             "--no-require-captions` does), or any (1, D) row for a model trained without text")
        latent, text = torch.as_tensor(latent), torch.as_tensor(text)
        if latent.ndim != 4:
            raise ValueError(f"latent must be (C, T, H, W), got shape {tuple(latent.shape)}")
        if text.ndim != 2:
            raise ValueError(f"text embedding must be (L, D), got shape {tuple(text.shape)}")
        for name, t in (("latent", latent), ("text", text)):
            if t.dtype not in FLOAT_DTYPES:
                raise TypeError(f"{name} dtype must be one of {[str(d) for d in FLOAT_DTYPES]}, got {t.dtype}")
        if meta.modality == "image" and latent.shape[1] != 1:
            raise ValueError(f"an image is a 1-frame video: latent T must be 1, got {latent.shape[1]}")
        if meta.text_length == 0:
            meta.text_length = int(text.shape[0])
        if not 0 < meta.text_length <= text.shape[0]:
            raise ValueError(f"text_length {meta.text_length} must be in 1..{text.shape[0]} (rows of the text embedding)")
        fmt = self.array_format
        members = {
            f"{key}.latent.{fmt}": encode_array(latent, fmt),
            f"{key}.text.{fmt}": encode_array(text, fmt),
            f"{key}.json": json.dumps({"format_version": SAMPLE_FORMAT, **meta.to_json()}).encode(),
        }
        size = sum(len(b) + 1024 for b in members.values())  # + tar headers and padding
        if self._tar is not None and self._bytes + size > self.max_shard_bytes and self._bytes > 0:
            self._finish_shard()
        if self._tar is None:
            self._open_shard()
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), self._mtime, 0o644
            self._tar.addfile(info, io.BytesIO(data))  # type: ignore[union-attr]
        self._bytes += size
        self._keys.add(key)

    def _shard_name(self, index: int) -> str:
        return f"{self.prefix}-{index:06d}.tar"

    def _open_shard(self) -> None:
        final = self.folder / self._shard_name(self._index)
        if final.exists():
            taken = [int(m.group(1)) for f in self.folder.glob(f"{glob_escape(self.prefix)}-*.tar")
                     if (m := re.fullmatch(re.escape(self.prefix) + r"-(\d+)\.tar", f.name))]
            raise FileExistsError(f"shard {final} exists; to add shards to this folder pass start_index={max(taken) + 1} "
                                  "(after its last shard) and run prepare_dataset on it again, or write to a new folder")
        # created exclusively under an unpredictable name: a link planted in the folder is never written through
        self._tmp = temporary_file(self.folder, prefix=temporary_prefix(final.name), suffix="")
        self._tar = tarfile.open(self._tmp, "w")
        self._bytes = 0

    def _finish_shard(self) -> None:
        assert self._tar is not None and self._tmp is not None
        self._tar.close()
        final = self.folder / self._shard_name(self._index)
        rename_into_place(self._tmp, final, durable=True)  # atomic: the final name only ever names a complete shard
        self.shards.append(final)
        self._tar, self._tmp = None, None
        self._index += 1

    def close(self) -> list[Path]:
        """Finish the open shard; returns every completed shard."""
        if self._tar is not None:
            self._finish_shard()
        return self.shards

    def abort(self) -> None:
        """Drop the open (incomplete) shard; completed shards stay."""
        if self._tar is not None:
            self._tar.close()
            if self._tmp is not None:
                self._tmp.unlink(missing_ok=True)
            self._tar, self._tmp = None, None

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def temporary_prefix(shard_name: str) -> str:
    """What the temporary file of shard ``shard_name`` is named before its random part
    (``.shard-000003.tar.tmp-k2x9q7ab``): the rule a sweep of a killed run's leftovers globs."""
    return f".{shard_name}.tmp-"


def _protect_from_braceexpand(pattern: str) -> str:
    # energon brace-expands split patterns before compiling them, which eats backslashes (\\d -> d)
    # and turns {m,n} quantifiers into alternatives; escaping makes energon compile the regex as given.
    return pattern.replace("\\", "\\\\").replace("{", "\\{").replace("}", "\\}")


def prepare_dataset(
    folder: str | os.PathLike,
    *,
    split_parts: Sequence[tuple[str, str]] = (("train", r".*\.tar$"),),
    workers: int = 1,
) -> Path:
    """Index the shards of ``folder`` with energon's own preparation and write ``dataset.yaml``.

    ``split_parts`` maps split names to regular expressions over shard file names (energon split
    parts are regular expressions), e.g. ``[("train", r"shard-0000[0-8]\\.tar$"), ("val", r"shard-000009\\.tar$")]``.
    Returns the ``.nv-meta`` folder. Energon's ``get_train_dataset`` reads it with a task encoder that has a
    cooker (:class:`vfm_data.VideoTaskEncoder`); the ``energon info``/``lint``/``preview`` commands need a typed
    dataset: they read ``.nv-meta/energon_tools.yaml`` (``--dataset-config energon_tools.yaml``), written here too.
    """
    from megatron.energon.flavors.webdataset import BaseWebdatasetFactory
    from megatron.energon.flavors.webdataset.config import MAIN_FOLDER_NAME

    folder = Path(folder)
    shards = sorted(p.name for p in folder.glob("*.tar"))
    if not shards:
        raise FileNotFoundError(f"no .tar shards in {folder}")
    for name, pattern in split_parts:
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"split part {name!r}: {pattern!r} is not a regular expression ({exc})") from exc
        if not any(regex.match(s) for s in shards):
            raise ValueError(f"split part {name!r}: pattern {pattern!r} matches none of {shards[:5]}...")
    meta = folder / MAIN_FOLDER_NAME
    _drop_links(meta)
    try:
        with _energon_output_on_failure():
            BaseWebdatasetFactory.prepare_dataset(
                folder,
                shards,
                split_parts_patterns=[(name, _protect_from_braceexpand(p)) for name, p in split_parts],
                workers=workers,
            )
    except SystemExit:  # energon's answer to a duplicate key: print, then end the process
        raise ValueError(f"{folder}: {_duplicate_key(folder, shards)}; energon needs every sample key once per dataset. "
                         "Accepted: unique keys (write them so, or let energon prepare --fix-duplicates rewrite the "
                         "tars to prefix each key with its shard name)") from None
    except AssertionError as exc:  # energon asserts every shard holds a sample ("Shard ... has no samples.")
        if "has no samples" not in str(exc):
            raise  # another of energon's checks: its own words, not advice about empty tars
        raise ValueError(f"{folder}: {exc} A shard must hold at least one sample: remove the empty tar") from None
    replace_file(meta / "dataset.yaml", yaml.safe_dump(DATASET_YAML, sort_keys=False))
    write_tools_config(meta, folder / shards[0])  # what energon's info / lint / preview read (they cannot read a crude one)
    return meta


@contextlib.contextmanager
def _energon_output_on_failure():
    """Energon's preparation prints its progress ("Saving info to ...", "Collapsing split parts...
    Done"): kept from a library call's stdout when it succeeds, passed on to stdout when it fails,
    since energon prints its reasons there (read by the curator's index rebuild)."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
            yield
    except BaseException:
        sys.stdout.write(captured.getvalue())
        raise


def _duplicate_key(folder: Path, shards: list[str]) -> str:
    """The first sample key found twice in ``shards``, named with its shards (read from tar headers);
    energon prints it but raises nothing that says which."""
    where: dict[str, str] = {}
    for shard in shards:
        last = None
        with tarfile.open(folder / shard, "r:") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                folder_part, _, base = member.name.rpartition("/")
                key = (folder_part + "/" if folder_part else "") + base.partition(".")[0]  # webdataset's key
                if key == last:
                    continue  # the next member of the same sample
                if key in where:
                    return f"sample key {key!r} appears twice (in {where[key]} and {shard})"
                where[key], last = shard, key
    return "a sample key appears twice"


def _drop_links(meta: Path) -> None:
    """Remove symbolic links at ``meta`` (the ``.nv-meta`` folder) and in it, leaving what they point
    to alone. Energon writes its files there under fixed names with plain ``open`` / sqlite, which
    follow links: a shard folder from elsewhere holding ``.nv-meta/split.yaml -> ~/.bashrc`` (or
    ``.nv-meta -> ~``) would have the linked files overwritten. Everything in ``.nv-meta`` is made
    again from the shards, so a link there holds nothing to keep."""
    if meta.is_symlink():
        meta.unlink()
        return
    if meta.is_dir():
        for entry in os.scandir(meta):
            if entry.is_symlink():
                os.unlink(entry.path)
