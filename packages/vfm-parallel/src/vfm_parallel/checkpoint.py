"""Distributed training checkpoints: DCP tensors in safetensors files, JSON for the rest, atomic commits.

A checkpoint is a folder ``<root>/step_<N>/``, N in eight digits (``step_00000012``: :func:`step_dir`), which
:func:`save` returns; :func:`latest` gives a root's newest committed one (None: none yet), to resume from:

- ``tensors/``: model, optimizer and EMA tensors written with ``torch.distributed.checkpoint`` through
  its safetensors storage (each rank writes its own shards; offsets live in the safetensors headers).
  DCP records *global* shapes and offsets, so a checkpoint saved under one layout (TP2, FSDP2) loads
  under another, or in one process. Nothing is unpickled on load.
- ``state.json``: step, the optimizer's non-tensor settings (param groups), anything else global.
- ``ranks/rank_<r>.json``: per-rank state (the loader position of that data-parallel rank).
- ``manifest.json``: every other file with its size and sha256, written last (checkpoint_integrity).

Atomicity: everything is written under ``<root>/.tmp-step_<N>-<random>/`` (rank 0 makes it, every rank
learns its name; no other process can plant anything at a name it cannot predict) and renamed to
``step_<N>`` only after every rank has finished; the rename is the commit. The folder is private (0700)
while it is written, since DCP writes and the manifest rereads its files by name, and gets the umask's
permissions just before the rename. A process killed during a save leaves a ``.tmp-step_<N>-*`` folder
(``.tmp-step_<N>`` from earlier versions) that loading ignores and the next save of that step removes
(folders only: a link or file at such a name is left alone and stops nothing), so the last good
checkpoint is never touched. Re-saving a committed step renames the old folder aside
(``.old-step_<N>-<random>``, listed while no ``step_<N>`` exists), renames the new one in, then deletes
the old (:mod:`vfm_parallel.checkpoint_folders`). Older checkpoints beyond ``keep`` are removed after
the commit, best effort (what cannot be listed or removed is left for a later save). A save that fails on
any rank (disk full, a folder that cannot be written, a written file that does not read back, a symbolic
link in the folder, any exception of one rank) fails on every rank alike with
:class:`CheckpointSaveError`, one line naming the step, the rank and what failed; no rank is left
waiting in a collective, its ``.tmp-*`` folder is removed, nothing is pruned, and the newest committed
checkpoint is named as the one still there (or the line says they could not be listed). A failure after
the commit's rename (syncing the root, checking the renamed folder) says instead that the step is in place.

Loading is whole or refused: the files against the manifest, the step in ``state.json`` against the
folder, every tensor's chunks complete, and the saved names, shapes and dtypes against the model's.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import HuggingFaceStorageReader, HuggingFaceStorageWriter
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch import nn
from vfm_plugins import json_data
from vfm_plugins.files import SwappedFileError, replace_file

from vfm_parallel.checkpoint_integrity import (  # noqa: F401  (the errors are part of this module's interface)
    CheckpointError,
    CheckpointFormatError,
    DamagedCheckpointError,
    IncompatibleCheckpointError,
    LinkInCheckpointError,
    NotCommittedError,
    UnlistableFolderError,
    UnreadableFileError,
    check_tensors,
    first_line,
    folder_step,
    read_manifest,
    valid_step,
    verify_files,
    verify_tensors,
    write_manifest,
)
from vfm_parallel.checkpoint_folders import (  # noqa: F401  (step_dir, list_checkpoints, latest: this module's interface)
    AfterRenameError,
    SaveFolder,
    fsync_dirs,
    latest,
    list_checkpoints,
    prune,
    step_dir,
)

class CheckpointSaveError(CheckpointError):
    """Writing a checkpoint failed on some rank (disk full, a folder that cannot be written, a file that
    does not read back, any exception): every rank raises it alike. Nothing was committed, unless the
    message says the step is in place (what failed came after the commit's rename)."""


class ExportSaveError(CheckpointError):
    """Writing the inference export at the end of a run failed (a full disk, a folder that cannot be
    written); the run's last checkpoint is complete, and running it again writes the export."""


_OPTIM_OPTIONS = StateDictOptions(flatten_optimizer_state_dict=True)
#: torch optimizers' param-group entries that pick an implementation, not a training setting
_KERNEL_CHOICES = frozenset({"fused", "foreach", "capturable", "differentiable"})


def _from_rank0(value: Any) -> Any:
    """Rank 0's ``value`` on every rank (collective when a process group is up)."""
    if not dist.is_initialized():
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def _barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, json.dumps(data, indent=1), durable=True)


def _split(flat: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    tensors = {k: v for k, v in flat.items() if isinstance(v, torch.Tensor)}
    other = {k: (list(v) if isinstance(v, tuple) else v) for k, v in flat.items() if not isinstance(v, torch.Tensor)}
    return tensors, other


def _gather_tensors(model: nn.Module, optimizer: torch.optim.Optimizer | None, ema: Any) -> tuple[dict, dict]:
    """(tensors keyed model./optim./ema., non-tensor optimizer entries) in DCP's FQN naming."""
    tensors = {f"model.{k}": v for k, v in get_model_state_dict(model).items()}
    optim_other: dict[str, Any] = {}
    if optimizer is not None:
        optim_tensors, optim_other = _split(get_optimizer_state_dict(model, optimizer, options=_OPTIM_OPTIONS))
        tensors.update({f"optim.{k}": v for k, v in optim_tensors.items()})
    if ema is not None:
        tensors.update({f"ema.{k}": v for k, v in ema.state_dict().items()})
    return tensors, optim_other


def save(
    root: str | Path,
    step: int,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    ema: Any = None,
    state: dict[str, Any] | None = None,
    rank_state: dict[str, Any] | None = None,
    rank_key: int | None = None,
    keep: int = 0,
) -> Path:
    """Save a checkpoint of ``step`` atomically; collective when a process group is up.

    ``state`` (JSON, global) is written by rank 0; ``rank_state`` (JSON) by every rank under
    ``rank_key`` (default: the global rank; the trainer passes its data-parallel rank).
    ``keep`` > 0 removes older committed checkpoints beyond the newest ``keep``.
    """
    root = Path(root)
    final = step_dir(root, step)
    rank = _rank()
    folder: SaveFolder | None = None
    tmp: Path | None = None
    gathered: tuple[dict, dict] = ({}, {})

    def fresh_tmp() -> None:
        nonlocal folder
        root.mkdir(parents=True, exist_ok=True)
        folder = SaveFolder(root, final)

    def gather() -> None:
        nonlocal gathered
        gathered = _gather_tensors(model, optimizer, ema)

    def write_files() -> None:
        tensors, optim_other = gathered
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")
            writer = HuggingFaceStorageWriter(str(tmp / "tensors"), save_distributed=True)
            # each rank fsyncs the files it writes (FileSystemWriter's default; this writer takes no argument
            # for it): the manifest's hashing syncs every file again, but from whichever rank hashes it, and on
            # a filesystem shared by nodes the writer's client is the one holding a file's unwritten pages
            writer.sync_files = True
            dcp.save(tensors, storage_writer=writer)
        if rank_state is not None:
            key = rank if rank_key is None else rank_key
            _write_json(tmp / "ranks" / f"rank_{key:05d}.json", rank_state)
        if rank == 0:
            _write_json(tmp / "state.json", {**(state or {}), "step": step, "optimizer": optim_other})

    def commit() -> None:
        fsync_dirs(tmp)
        folder.commit(final)

    try:  # each phase agreed by every rank (a gather, which is also the barrier between phases)
        _phase(final, fresh_tmp if rank == 0 else None)
        tmp = Path(_from_rank0(str(folder.path) if folder is not None else None))
        # its own phase: failing on one rank inside write_files, before DCP's collectives, it would
        # leave the others in DCP's while that rank is in the agreement's
        _phase(final, gather)
        _phase(final, write_files)
        _phase(final, lambda: write_manifest(tmp, step))  # last: hashes (and fsyncs again) every file
        _phase(final, commit if rank == 0 else None)
    except CheckpointSaveError:
        try:
            if folder is not None and folder.is_ours():  # not one swapped in
                shutil.rmtree(folder.path, ignore_errors=True)
        except OSError:
            pass  # left for the next save of this step to remove; the barrier below must be reached
        _barrier()  # the partial folder is gone when any rank goes on
        raise
    finally:
        if folder is not None:
            folder.close()
    if rank == 0 and keep > 0:
        prune(root, keep)
    _barrier()
    return final


_FREE_SPACE = "Free space or fix the folder's permissions"
_FIX_CAUSE = "Fix its cause (that rank's traceback shows where it was raised)"


def _phase(final: Path, write=None) -> None:
    """Run one phase of a save on this rank (``write``; None where this rank has no part in it), then
    agree with every rank: when it failed anywhere, every rank raises the same error."""
    failure, cause = None, None
    if write is not None:
        # any exception (DCP's CheckpointException is a BaseException): raised on one rank alone, it
        # would leave the others waiting in the next collective
        try:
            write()
        except (Exception, CheckpointException) as exc:
            failure, cause = _describe(exc), exc
    _agree(final, failure, cause)


def _describe(exc: BaseException) -> tuple[int, str, str] | tuple[int, str, str, str]:
    """(the rank it failed on, what failed in one line, what to do[, what stands at the step's folder
    when the failure came after the commit's rename]) for one phase's exception."""
    if isinstance(exc, AfterRenameError):
        return _rank(), str(exc), exc.fix, exc.outcome
    if isinstance(exc, SwappedFileError):
        return _rank(), str(exc), "Stop whatever else writes in the checkpoint folder"
    if isinstance(exc, UnreadableFileError):  # the hashing's (or rank 0's listing's) verdict, the same on every rank
        what = ("a folder of this save, cannot be listed" if isinstance(exc, UnlistableFolderError)
                else "written by this save, does not read back")
        return exc.rank, f"{exc.name}, {what}: {exc.why}", (
            "Check the file system (and its permissions) under the checkpoint folder")
    if isinstance(exc, LinkInCheckpointError):  # rank 0's listing's verdict, the same on every rank
        more = f" (and {exc.more} more)" if exc.more else ""
        return 0, f"{exc.name} is a symbolic link to {exc.target}{more}: loading refuses links", (
            "Stop whatever writes links into the checkpoint folder (vfm writes none)")
    if isinstance(exc, OSError):
        return _rank(), f"{type(exc).__name__}: {exc}", _FREE_SPACE
    if isinstance(exc, CheckpointException):  # DCP's writer, raised on every rank: the failed ranks' own errors inside
        failed = [(rank, pair[0] if isinstance(pair, tuple) else pair) for rank, pair in exc.failures.items()]
        rank, first = next(((r, e) for r, e in failed if isinstance(e, OSError)), failed[0] if failed else (_rank(), exc))
        # the disk only for the disk's errors: a missing module there was "Free space or fix the permissions"
        return rank, f"{type(first).__name__}: {first_line(first)}", (
            _FREE_SPACE if isinstance(first, OSError) else _FIX_CAUSE)
    return _rank(), f"{type(exc).__name__}: {first_line(exc)}", _FIX_CAUSE


def _agree(final: Path, failure: tuple | None, cause: BaseException | None = None) -> None:
    """Every rank learns whether any rank's phase failed; then all raise the same error (the rank
    that failed with its own exception as the cause)."""
    failures = [failure]
    if dist.is_initialized():
        failures = [None] * dist.get_world_size()
        dist.all_gather_object(failures, failure)
    bad = [f for f in failures if f is not None]
    if not bad:
        return
    rank, why, fix, *after_rename = min(bad)
    on = f" on rank {rank}" if dist.is_initialized() else ""
    if after_rename:
        outcome = after_rename[0]
    else:  # rank 0 lists, so every rank says the same; every rank is here, so the broadcast pairs
        outcome = f"nothing of it was committed and {_from_rank0(_newest(final.parent) if _rank() == 0 else None)}"
    raise CheckpointSaveError(f"saving checkpoint {final} failed{on} ({why}); {outcome}. {fix}, then run again "
                              f"(it resumes from the newest checkpoint)") from cause


def _newest(root: Path) -> str:
    """What the failure message says of the checkpoints before it. Best effort: an error listing them
    raised here would skip the failed save's cleanup (its temporary folder, the barrier)."""
    try:
        kept = list_checkpoints(root)
    except OSError as exc:
        return f"the checkpoints under {root} could not be listed ({type(exc).__name__}: {exc})"
    return f"the newest committed checkpoint, {kept[-1]}, is untouched" if kept else "no checkpoint was committed before"


def _restore_tuples(template: dict[str, Any], loaded: dict[str, Any]) -> dict[str, Any]:
    return {k: (tuple(v) if isinstance(template.get(k), tuple) else v) for k, v in loaded.items()}


def read_state(path: str | Path) -> dict[str, Any]:
    """``state.json`` of a committed checkpoint, its ``step`` checked: a whole number >= 0 equal to
    the manifest's and to the folder name's. Raises :class:`DamagedCheckpointError` naming the file."""
    path = Path(path)
    manifest = read_manifest(path)
    try:
        state = json_data.loads((path / "state.json").read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DamagedCheckpointError(f"checkpoint {path} is damaged: state.json is not readable JSON ({exc})") from None
    if not isinstance(state, dict):
        raise DamagedCheckpointError(f"checkpoint {path} is damaged: state.json is not a JSON object")
    step, named = state.get("step"), folder_step(path)
    if not valid_step(step) or step != manifest["step"] or (named is not None and step != named):
        want = f"{named}, as the folder name says" if named is not None else f"{manifest['step']}, as the manifest says"
        raise DamagedCheckpointError(f"checkpoint {path}: state.json has step {step!r}; expected {want}")
    if not isinstance(state.get("optimizer"), dict):  # every save writes it ({} without an optimizer)
        what = "has no 'optimizer'" if "optimizer" not in state else "'optimizer' is not an object"
        raise DamagedCheckpointError(f"checkpoint {path} is damaged: state.json {what}")
    return state


def verify(path: str | Path, *, shared: bool = False) -> dict[str, Any]:
    """Check that ``path`` is whole: every file as the manifest lists it, a valid step, every tensor
    completely saved. Collective when a process group is up: each node's copy is hashed whole, or,
    with ``shared`` (only where every rank is known to read one folder), once in the whole job (see
    :func:`verify_files`). Returns the global state."""
    path = _given(path)
    verify_files(path, shared=shared)
    state = read_state(path)
    verify_tensors(path)
    return state


def load(
    path: str | Path,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    ema: Any = None,
    rank_key: int | None = None,
    check_files: bool = True,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Load a checkpoint into the (already parallelized) ``model``, ``optimizer`` and ``ema``.

    Works for any layout: DCP reads the slices this rank's tensors cover. Refuses (with one line,
    see :mod:`vfm_parallel.checkpoint_integrity`) a checkpoint that is not whole, unless
    ``check_files`` is False because the caller has just run :func:`verify`, and one whose tensors
    of the parts asked for (model; optimizer and EMA when given) differ in name, shape or dtype.
    Returns (global state, this rank's state or None when the checkpoint has no file for ``rank_key``).
    """
    path = _given(path)
    state = verify(path) if check_files else read_state(path)
    tensors, _ = _gather_tensors(model, optimizer, ema)
    prefixes = ("model.",) + (("optim.",) if optimizer is not None else ()) + (("ema.",) if ema is not None else ())
    _read_checked(path, tensors, prefixes)
    set_model_state_dict(model, {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")})
    if optimizer is not None:
        template = get_optimizer_state_dict(model, optimizer, options=_OPTIM_OPTIONS)
        flat = {k[len("optim."):]: v for k, v in tensors.items() if k.startswith("optim.")}
        saved = _restore_tuples(template, state["optimizer"])
        # the kernel choices are this run's, not the checkpoint's: a run saved with the foreach kernel
        # (on CPU) resumes with the fused one (on CUDA), whose device-side skip needs it, and back
        flat.update({k: template[k] if k.rsplit(".", 1)[-1] in _KERNEL_CHOICES and k in template else v
                     for k, v in saved.items()})
        set_optimizer_state_dict(model, optimizer, flat, options=_OPTIM_OPTIONS)
    if ema is not None:
        ema.load_state_dict({k[len("ema."):]: v for k, v in tensors.items() if k.startswith("ema.")})
    key = _rank() if rank_key is None else rank_key
    return state, _read_rank_state(path, key)


def _given(path: str | Path | None) -> Path:
    """``path`` as a Path; None (what :func:`latest` returns for a root without checkpoints) refused saying so."""
    if path is None:
        raise NotCommittedError("no checkpoint given (None): checkpoint.latest(root) is None when root holds no committed "
                                "checkpoint; start without one then (`if (last := checkpoint.latest(root)) is not None:`)")
    return Path(path)


def load_weights(path: str | Path, module: nn.Module, part: str = "model") -> None:
    """Read the saved ``part`` of checkpoint ``path`` ("model", or "ema": the EMA of the model's
    parameters) in place into ``module``, whole in this process whatever layout saved it, and nothing
    else: one copy of the weights in memory. Not collective: under a process group one rank may call it
    alone (rank 0 making an inference export after training). The caller has run :func:`verify`
    (collective: on every rank); the saved names, shapes and dtypes are checked against ``module``'s
    state dict (a module with persistent buffers has no whole "ema" part)."""
    path, prefix = _given(path), f"{part}."
    read_manifest(path)  # a missing folder, or the checkpoints' root, is named as that (not as damaged tensors)
    _read_checked(path, {prefix + k: v for k, v in module.state_dict().items()}, (prefix,), collective=False)


def _read_checked(path: Path, tensors: dict[str, torch.Tensor], prefixes: tuple[str, ...], *, collective: bool = True) -> None:
    """DCP reads ``tensors`` (checkpoint names) in place, after their names, shapes and dtypes are
    checked against the saved ones under ``prefixes``. ``collective=False``: this process alone reads
    whole tensors (a rank that waited for its peers here would hang until the group's timeout)."""
    check_tensors(path, {k: (tuple(v.shape), str(v.dtype).removeprefix("torch.")) for k, v in tensors.items()}, prefixes,
                  collective=collective)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")
        try:
            dcp.load(tensors, storage_reader=HuggingFaceStorageReader(str(path / "tensors")), no_dist=not collective)
        except Exception as exc:  # after the checks above this is unexpected: still one line naming the folder
            raise DamagedCheckpointError(f"checkpoint {path}: reading its tensors failed "
                                         f"({type(exc).__name__}: {first_line(exc)})") from exc


def _read_rank_state(path: Path, key: int) -> Any:
    rank_file = path / "ranks" / f"rank_{key:05d}.json"
    if not rank_file.is_file():
        return None
    return _rank_file_state(path, rank_file)


def _rank_file_state(path: Path, rank_file: Path) -> Any:
    """The JSON of ``rank_file`` in checkpoint ``path``; a file that cannot be read or parsed is a
    :class:`DamagedCheckpointError` naming it (an earlier checkpoint holds the positions too)."""
    try:
        data = rank_file.read_bytes()
    except OSError as exc:
        raise DamagedCheckpointError(f"checkpoint {path} is damaged: ranks/{rank_file.name} cannot be read "
                                     f"({type(exc).__name__}: {exc.strerror or exc}); resume from an earlier checkpoint") from None
    try:
        return json_data.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DamagedCheckpointError(f"checkpoint {path} is damaged: ranks/{rank_file.name} is not readable JSON ({exc}); "
                                     "resume from an earlier checkpoint") from None


def rank_states(path: str | Path) -> dict[int, dict[str, Any]]:
    """Every per-rank state in a checkpoint, by rank key (to remap when the layout changed); a rank file
    that cannot be read or parsed is a :class:`DamagedCheckpointError` naming it."""
    folder = Path(path) / "ranks"
    if not folder.is_dir():
        return {}
    return {int(p.stem.split("_")[1]): _rank_file_state(Path(path), p) for p in sorted(folder.glob("rank_*.json"))}
