"""Whole or refused: the manifest a checkpoint commits with, and the checks that loading runs.

``manifest.json`` (written last, just before the commit rename) lists every other file of the
checkpoint with its size and sha256. A folder without one is not a committed checkpoint. Sealing
lists the folder once, on rank 0, without following links, and refuses one that holds a symbolic
link (loading would refuse the checkpoint) or a folder it cannot list. Hashing is split over the
ranks, file by file (sha256 runs at about 0.8 GB/s on one core); the verdicts are gathered, so every
rank raises the same error and none is left waiting in a collective. Sealing splits over every rank
(the run folder is one folder every node shares); verifying splits over the ranks that read the same
copy (:func:`_copy_share`), so that each node's own copy (node-local scratch) is hashed whole: on a
shared filesystem that reads the checkpoint once per node, unless the caller knows it is shared.

Errors are one line: :class:`DamagedCheckpointError` (files missing, changed, unreadable, a bad
step: ``resume = "auto"`` may fall back to an older checkpoint) and
:class:`IncompatibleCheckpointError` (an intact checkpoint of another model or run: never skipped).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
import stat
from pathlib import Path
from typing import Any, Iterable

import torch.distributed as dist
from vfm_plugins import json_data
from vfm_plugins.files import replace_file
from vfm_plugins.formats import FormatVersionError, check_format_version, installed

from vfm_parallel.checkpoint_names import SAVE_FOLDER, folder_step  # noqa: F401  (folder_step: this module's interface too)
from vfm_parallel.preflight import ranks_on_hosts

MANIFEST = "manifest.json"
#: The checkpoint's format version, kept in its manifest (written last, read first): bumped when an older
#: vfm would misread the folder (state.json, ranks/, tensors/ or the manifest changing meaning).
MANIFEST_FORMAT = 1
_SHOWN = 3  # names listed per kind of difference


class CheckpointError(ValueError):
    """A checkpoint cannot be used; the message is one line naming the folder and what is wrong."""


class DamagedCheckpointError(CheckpointError):
    """Files missing, changed or unreadable, or a bad step: the checkpoint is not what was committed."""


class NotCommittedError(DamagedCheckpointError, FileNotFoundError):
    """No manifest (or no folder): a save that never committed, or not a checkpoint at all."""


class UnreadableFileError(DamagedCheckpointError):
    """A file of a folder being sealed (:func:`write_manifest`) could not be read: ``name`` (relative to
    the folder), ``why`` (the OS error) and the ``rank`` that tried; every rank raises it alike."""

    def __init__(self, message: str, name: str = "", why: str = "", rank: int = 0) -> None:
        super().__init__(message)
        self.name, self.why, self.rank = name, why, rank


class UnlistableFolderError(UnreadableFileError):
    """A folder being sealed could not be listed: ``name`` is the folder (relative; ``.`` for itself)."""


class LinkInCheckpointError(DamagedCheckpointError):
    """A folder being sealed (:func:`write_manifest`) holds a symbolic link ``name`` (relative to the
    folder) to ``target``: hashed through, it would commit a checkpoint that loading refuses. Found by
    rank 0, which lists the folder; every rank raises it alike."""

    def __init__(self, message: str, name: str = "", target: str = "", more: int = 0) -> None:
        super().__init__(message)
        self.name, self.target, self.more = name, target, more


class IncompatibleCheckpointError(CheckpointError):
    """An intact checkpoint that does not fit this model or run (names, shapes, dtypes, settings)."""


class CheckpointFormatError(IncompatibleCheckpointError, FormatVersionError):
    """A checkpoint of a format version this vfm does not read (saved by a newer vfm). Not a damaged one:
    ``resume = "auto"`` stops at it instead of passing over it to an older checkpoint (whose run would
    then save over the newer one)."""


def _rank_world() -> tuple[int, int]:
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _all_gather(value: Any) -> list[Any]:
    if not dist.is_initialized():
        return [value]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def valid_step(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def hash_file(path: Path, sync: bool = False) -> dict[str, Any]:
    """{"size", "sha256"} of a file; ``sync`` also flushes it to disk. In a save that is a second fsync,
    from whichever rank hashes the file: its writer synced it already, which is what counts where nodes
    share the filesystem (fsync flushes this client's pages; the writer's client holds the file's)."""
    digest = hashlib.sha256()
    buffer = bytearray(4 << 20)
    view = memoryview(buffer)
    size = 0
    with path.open("rb") as f:
        while n := f.readinto(buffer):
            digest.update(view[:n])
            size += n
        if sync:
            os.fsync(f.fileno())
    return {"size": size, "sha256": digest.hexdigest()}


def _files(folder: Path) -> list[str]:
    """Every regular file under ``folder`` but the manifest, as sorted POSIX paths relative to it."""
    names = (p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    return sorted(n for n in names if n != MANIFEST)


def _sealable(folder: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """(every regular file under ``folder`` but the manifest, every symbolic link with its target), as
    sorted POSIX paths relative to it. Links are not followed (a linked folder is one entry), and a
    folder that cannot be listed raises: pathlib's rglob skips it silently, leaving its files out."""
    files, links = [], []

    def refuse(exc: OSError) -> None:
        raise exc

    for root, dirs, names in os.walk(folder, onerror=refuse, followlinks=False):
        for name in dirs + names:
            path = os.path.join(root, name)
            relative = Path(path).relative_to(folder).as_posix()
            if relative == MANIFEST:  # written last, replacing whatever is at its name (a link too)
                continue
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                links.append((relative, os.readlink(path)))
            elif stat.S_ISREG(mode):
                files.append(relative)
    return sorted(files), sorted(links)


def _listing_of_rank0(folder: Path) -> tuple[list[str], list[tuple[str, str]], tuple[str, str] | None]:
    """Rank 0's :func:`_sealable` listing on every rank, or (name, why) when it could not list: one
    listing, so that every rank hashes its share of the same names, and a failure is every rank's
    (raised on rank 0 alone, before the hashes' gather, rank 0 would pair with the others' next
    collective). One rank reads the folder, not every one of them."""
    listing = None
    if _rank_world()[0] == 0:
        try:
            listing = (*_sealable(folder), None)
        except Exception as exc:  # any: this rank must reach the broadcast
            where = getattr(exc, "filename", None)
            name = Path(where).relative_to(folder).as_posix() if where and Path(where).is_relative_to(folder) else str(folder)
            listing = ([], [], (name or ".", str(getattr(exc, "strerror", None) or f"{type(exc).__name__}: {exc}")))
    if dist.is_initialized():
        box = [listing]
        dist.broadcast_object_list(box, src=0)
        listing = box[0]
    return listing


def _links(folder: Path) -> list[str]:
    """Every symbolic link under ``folder`` (files and folders, not followed), as sorted relative paths."""
    found = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in dirs + files:
            if os.path.islink(os.path.join(root, name)):
                found.append(Path(root, name).relative_to(folder).as_posix())
    return sorted(found)


def _hash_share(folder: Path, names: list[str], sync: bool, share: tuple[int, int]) -> dict[str, Any]:
    """Share ``(index, count)`` of ``names`` hashed: {name: entry, or why it could not be read (a str)}."""
    index, count = share
    out: dict[str, Any] = {}
    for name in names[index::count]:
        try:
            out[name] = hash_file(folder / name, sync)
        except OSError as exc:
            out[name] = str(exc.strerror or exc)
    return out


def write_manifest(folder: str | Path, step: int) -> Path:
    """Hash (and fsync) every file of ``folder`` and write its manifest; collective when a process
    group is up (every rank hashes its share, rank 0 writes). Call it after every file is written."""
    folder = Path(folder)
    names, links, unlisted = _listing_of_rank0(folder)
    if unlisted is not None:
        name, why = unlisted
        raise UnlistableFolderError(f"cannot commit checkpoint {folder}: {name} cannot be listed on rank 0 ({why})",
                                    name, why, 0)
    if links:  # hashed through, a linked file would commit, and loading refuses the checkpoint
        (name, target), more = links[0], len(links) - 1
        also = f" (and {more} more)" if more else ""
        raise LinkInCheckpointError(f"cannot commit checkpoint {folder}: {name} is a symbolic link to {target}{also}; "
                                    "vfm writes none and loading refuses links", name, target, more)
    hashed: dict[str, Any] = {}
    bad: list[tuple[str, str, int]] = []
    for rank, share in enumerate(_all_gather(_hash_share(folder, names, sync=True, share=_rank_world()))):
        hashed.update(share)
        bad += [(n, e, rank) for n, e in share.items() if isinstance(e, str)]
    if bad:
        name, why, rank = min(bad)
        on = f" on rank {rank}" if dist.is_initialized() else ""
        raise UnreadableFileError(f"cannot commit checkpoint {folder}: {name} is unreadable{on} ({why})", name, why, rank)
    path = folder / MANIFEST
    if _rank_world()[0] == 0:
        manifest = {"format": MANIFEST_FORMAT, "step": step, "files": {n: hashed[n] for n in names},
                    "written_by": installed("vfm-parallel")}  # named when a later vfm refuses the format
        replace_file(path, json.dumps(manifest, indent=1), durable=True)  # a link at the name is replaced, not followed
    return path


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest, its shape checked (raises :class:`NotCommittedError` or :class:`DamagedCheckpointError`)."""
    path = folder / MANIFEST
    if not folder.is_dir():
        raise NotCommittedError(f"{folder} is not a committed checkpoint (no such folder)")
    if not path.is_file():
        # imported here: checkpoint_folders imports this module; its listing is latest()'s, which the message names
        from vfm_parallel.checkpoint_folders import list_checkpoints

        def held_in(root: Path) -> list[Path]:
            try:
                return list_checkpoints(root)
            except OSError:  # an unreadable folder: the messages below are still true
                return []

        if held := held_in(folder):  # the root that save() was given, passed where one of its checkpoints belongs
            raise NotCommittedError(f"{folder} is a folder of checkpoints ({', '.join(p.name for p in held)}), not one: pass "
                                    f"one of them, e.g. checkpoint.latest({folder}) = {held[-1]}")
        if SAVE_FOLDER.search(folder.name):  # a folder save() began: step_<N>, its aside or temporary copy
            raise NotCommittedError(f"{folder} is not a committed checkpoint (no {MANIFEST}: the save did not finish)")
        if held := held_in(folder / "checkpoints"):  # vfm train's out_dir, passed for one of its checkpoints
            raise NotCommittedError(f"{folder} is a training run's folder, not a checkpoint: its checkpoints are "
                                    f"{folder / 'checkpoints'}/{{{', '.join(p.name for p in held)}}}; pass one of them, "
                                    f"e.g. checkpoint.latest({folder / 'checkpoints'}) = {held[-1]}")
        raise NotCommittedError(f"{folder} holds no checkpoint (no {MANIFEST}, no step_<N> folders): pass a step_<N> "
                                "folder that checkpoint.save wrote (vfm train writes them under train.out_dir/checkpoints)")
    try:
        manifest = json_data.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DamagedCheckpointError(f"checkpoint {folder} is damaged: {MANIFEST} is not readable JSON ({exc})") from None
    version = manifest.get("format") if isinstance(manifest, dict) else None
    # a newer format is incompatible (resume = "auto" stops there); one below 1 no vfm wrote: damaged, below
    if isinstance(version, int) and not isinstance(version, bool) and version > MANIFEST_FORMAT:
        check_format_version(version, where=str(path), what="vfm checkpoint", current=MANIFEST_FORMAT,
                             package="vfm-parallel", error=CheckpointFormatError, writer=manifest.get("written_by"))
    files = manifest.get("files") if isinstance(manifest, dict) else None
    well_formed = (
        isinstance(files, dict) and manifest.get("format") == MANIFEST_FORMAT and valid_step(manifest.get("step"))
        and all(isinstance(e, dict) and valid_step(e.get("size")) and isinstance(e.get("sha256"), str) for e in files.values())
    )
    if not well_formed:
        raise DamagedCheckpointError(f"checkpoint {folder} is damaged: {MANIFEST} is not a format-{MANIFEST_FORMAT} "
                                     "manifest (format, step, files: name -> size, sha256)")
    return manifest


def _boot_id() -> str | None:
    """This kernel's id, the same in every container on one machine and new at each boot (Linux)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _copy_key(folder: Path) -> tuple[Any, ...]:
    """What tells the copies of ``folder`` that the ranks read apart: the folder's device and inode on
    this kernel (boot id and host name). Ranks of one key read the same files; a node with its own copy
    (node-local scratch, or another path) has keys of its own. A kernel's inode numbers mean nothing on
    another machine, whose node-local copy, made alike on a like disk, may have the same ones."""
    try:
        st = os.stat(folder)
        inode: tuple[int, int] | None = (st.st_dev, st.st_ino)
    except OSError:  # no folder: read_manifest says so; such ranks hash nothing anyway
        inode = None
    return socket.gethostname(), _boot_id(), inode


def _copy_share(keys: list[tuple[Any, ...]], rank: int) -> tuple[int, int]:
    """This rank's (index, count) among the ranks whose copy key is its own: together they hash
    every file of their copy once."""
    mine = [r for r, key in enumerate(keys) if key == keys[rank]]
    return mine.index(rank), len(mine)


def _file_problems(folder: Path, manifest: dict[str, Any], share: tuple[int, int]) -> list[str]:
    """Missing, resized, unlisted and checksum-failing files (the hashing is this rank's ``share``)."""
    listed: dict[str, Any] = manifest["files"]
    links = _links(folder)
    if links:  # a copied or downloaded checkpoint must not reach outside itself; vfm writes no links
        return [f"{n} is a symbolic link to {os.path.realpath(folder / n)} (vfm writes none; accepted: the files "
                "themselves: copy the checkpoint with cp -rL)" for n in links]
    present = set(_files(folder))
    problems = [f"{n} is missing" for n in sorted(set(listed) - present)]
    problems += [f"{n} is not in the manifest" for n in sorted(present - set(listed))]
    same_size = []
    for name in sorted(set(listed) & present):
        size = (folder / name).stat().st_size
        if size != listed[name]["size"]:
            problems.append(f"{name} has {size} bytes, the manifest says {listed[name]['size']}")
        else:
            same_size.append(name)
    for name, entry in _hash_share(folder, same_size, sync=False, share=share).items():
        if isinstance(entry, str):
            problems.append(f"{name} is unreadable ({entry})")
        elif entry["sha256"] != listed[name]["sha256"]:
            problems.append(f"{name} has sha256 {entry['sha256'][:12]}..., the manifest says {listed[name]['sha256'][:12]}...")
    return problems


def verify_files(folder: str | Path, *, shared: bool = False) -> dict[str, Any]:
    """Check ``folder`` against its manifest: every file present with its size and sha256, no other
    file. Collective when a process group is up; every rank raises the same one-line error, which
    names the rank(s) and host(s) whose copy is damaged where the ranks read more than one copy.
    Each copy is hashed whole by the ranks reading it (a node with its own copy on node-local scratch
    checks all of it); ``shared=True``, only where every rank is known to read one folder (the
    training run's folder, which it probes), splits the hashing over every rank instead. Returns the
    manifest."""
    folder = Path(folder)
    rank, world = _rank_world()
    keys = _all_gather(_copy_key(folder))
    share = (rank, world) if shared else _copy_share(keys, rank)
    try:
        manifest, problems, error = read_manifest(folder), [], None
    except DamagedCheckpointError as exc:
        manifest, problems, error = None, [], exc
    if manifest is not None:
        problems = _file_problems(folder, manifest, share)
    gathered = _all_gather((str(folder), str(error) if error else None, type(error).__name__ if error else None, problems))
    copies = len(set(keys)) > 1  # one copy: naming the ranks that found the damage would locate nothing

    def located(message: str, ranks: list[int]) -> str:
        """``message`` (about the first rank's folder) naming ``ranks`` and their hosts after that folder."""
        if not copies:
            return message
        their = gathered[ranks[0]][0]
        return message.replace(their, f"{their} on {ranks_on_hosts([(r, keys[r][0]) for r in ranks])}", 1)

    errors: dict[tuple[str, str], list[int]] = {}  # (message, kind) -> the ranks that raised it, first rank first
    for r, (_, message, kind, _) in enumerate(gathered):
        if message is not None:
            errors.setdefault((message, kind), []).append(r)
    if errors:
        (message, kind), ranks = next(iter(errors.items()))
        raise (NotCommittedError if kind == NotCommittedError.__name__ else DamagedCheckpointError)(located(message, ranks))
    found: dict[str, list[int]] = {}  # problem -> the ranks that found it in their copy
    for r, (_, _, _, ps) in enumerate(gathered):
        for p in ps:
            found.setdefault(p, []).append(r)
    if found:
        first = min(found)
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        their = gathered[found[first][0]][0]
        raise DamagedCheckpointError(located(f"checkpoint {their} is damaged: {first}{more}", found[first]))
    return manifest


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message that says something: safetensors' own errors start with a
    newline, and their first line alone was empty."""
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else ""


# --- tensors against the model ---------------------------------------------------------------------------

def saved_tensors(folder: Path) -> dict[str, tuple[tuple[int, ...], str, str | None]]:
    """{name: (global shape, dtype, what is wrong with its saved chunks or None)} from the
    safetensors headers (DCP's view of the checkpoint; see :func:`chunk_problem`)."""
    from torch.distributed.checkpoint import HuggingFaceStorageReader

    try:
        metadata = HuggingFaceStorageReader(str(folder / "tensors")).read_metadata()
    except Exception as exc:  # any header that does not parse: name the folder, not torch's internals
        raise DamagedCheckpointError(f"checkpoint {folder} is damaged: its tensor headers do not read "
                                     f"({type(exc).__name__}: {first_line(exc)})") from None
    out = {}
    for name, meta in metadata.state_dict_metadata.items():
        shape = tuple(getattr(meta, "size", ()))
        chunks = [(tuple(c.offsets), tuple(c.sizes)) for c in getattr(meta, "chunks", [])]
        out[name] = (shape, str(getattr(meta.properties, "dtype", "?")).removeprefix("torch."),
                     chunk_problem(shape, chunks))
    return out


def _box(offsets: tuple[int, ...], sizes: tuple[int, ...]) -> str:
    return "[" + ", ".join(f"{o}:{o + n}" for o, n in zip(offsets, sizes)) + "]"


def chunk_problem(shape: tuple[int, ...], chunks: list[tuple[tuple[int, ...], tuple[int, ...]]]) -> str | None:
    """None when the chunks (offsets, sizes) tile the tensor exactly: each inside it, no two sharing
    an element, together every element (coverage by element ranges: duplicated or overlapping chunks
    cannot stand in for missing ones). Otherwise what is wrong, e.g. ``chunks [2:4, 0:3] and
    [2:4, 0:3] overlap``."""
    boxes = []
    for offsets, sizes in chunks:
        if len(offsets) != len(shape) or len(sizes) != len(shape) or any(
                o < 0 or n < 0 or o + n > d for o, n, d in zip(offsets, sizes, shape)):
            return f"chunk {_box(offsets, sizes)} lies outside its shape {list(shape)}"
        if math.prod(sizes) > 0:  # an empty chunk (a rank holding no rows) covers nothing
            boxes.append((offsets, sizes))
    # sweep along the dimension the chunks split most (dim 0 under FSDP, dim 1 for a column split):
    # only chunks whose ranges along it meet are compared
    d = max(range(len(shape)), key=lambda i: len({o[i] for o, _ in boxes})) if shape else 0
    boxes.sort(key=lambda b: b[0][d] if shape else 0)
    active: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    for offsets, sizes in boxes:
        if shape:
            active = [b for b in active if b[0][d] + b[1][d] > offsets[d]]
        for other in active:
            if all(o1 < o2 + n2 and o2 < o1 + n1 for o1, n1, o2, n2 in zip(offsets, sizes, other[0], other[1])):
                return f"chunks {_box(*other)} and {_box(offsets, sizes)} overlap"
        active.append((offsets, sizes))
    covered, total = sum(math.prod(s) for _, s in boxes), math.prod(shape)
    if covered < total:  # no overlap: the covered count is the union's
        return f"{total - covered} of its {total} elements are in no saved chunk"
    return None


def verify_tensors(folder: Path) -> None:
    """Every saved tensor tiled exactly by its chunks (a rank's file missing leaves holes; a crafted
    header can repeat a chunk in place of a missing one)."""
    bad = sorted((n, why) for n, (_, _, why) in saved_tensors(folder).items() if why is not None)
    if bad:
        (name, why), more = bad[0], (f" (and {len(bad) - 1} more tensors: {_names(n for n, _ in bad[1:])})"
                                     if len(bad) > 1 else "")
        raise DamagedCheckpointError(f"checkpoint {folder} is damaged: tensor {name} is not saved whole: {why}{more}")


def _names(names: Iterable[str]) -> str:
    names = list(names)
    shown = ", ".join(names[:_SHOWN])
    return shown + (f", ... {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def check_tensors(folder: Path, expected: dict[str, tuple[tuple[int, ...], str]], prefixes: tuple[str, ...], *,
                  collective: bool = True) -> None:
    """Raise :class:`IncompatibleCheckpointError` unless the saved tensors under ``prefixes`` are
    exactly ``expected`` (name -> (global shape, dtype)), gathered over the ranks (under pipeline
    parallelism each stage expects only its own blocks). Collective when a process group is up, unless
    ``collective`` is False: then ``expected`` is this process's whole model."""
    wanted: dict[str, tuple[tuple[int, ...], str]] = {}
    for part in (_all_gather(expected) if collective else [expected]):
        wanted.update(part)
    saved = {n: v[:2] for n, v in saved_tensors(folder).items() if n.startswith(prefixes)}
    missing = sorted(set(wanted) - set(saved))
    unexpected = sorted(set(saved) - set(wanted))
    both = sorted(set(saved) & set(wanted))
    shapes = [f"{n}: checkpoint {saved[n][0]} vs model {wanted[n][0]}" for n in both if saved[n][0] != wanted[n][0]]
    dtypes = [f"{n}: checkpoint {saved[n][1]} vs model {wanted[n][1]}" for n in both if saved[n][1] != wanted[n][1]]
    parts = [f"{len(items)} {label} ({_names(items)})" for label, items in
             (("missing", missing), ("unexpected", unexpected), ("with another shape", shapes),
              ("with another dtype", dtypes)) if items]
    if parts:
        raise IncompatibleCheckpointError(f"checkpoint {folder} does not fit the model: tensors " + "; ".join(parts))
