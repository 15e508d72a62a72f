"""Distributed training checkpoints: DCP tensors in safetensors files, JSON for the rest, atomic commits.

A checkpoint is a folder ``<root>/step_<N>/``:

- ``tensors/``: model, optimizer and EMA tensors written with ``torch.distributed.checkpoint`` through
  its safetensors storage (each rank writes its own shards; offsets live in the safetensors headers).
  DCP records *global* shapes and offsets, so a checkpoint saved under one layout (TP2, FSDP2) loads
  under another, or in one process. Nothing is unpickled on load.
- ``state.json``: step, the optimizer's non-tensor settings (param groups), anything else global.
- ``ranks/rank_<r>.json``: per-rank state (the loader position of that data-parallel rank).

Atomicity: everything is written under ``<root>/.tmp-step_<N>/`` and renamed to ``step_<N>`` only
after every rank has finished; the rename is the commit. A process killed during a save leaves a
``.tmp-*`` folder that loading ignores and the next save of that step replaces, so the last good
checkpoint is never touched. Older checkpoints beyond ``keep`` are removed after the commit.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import HuggingFaceStorageReader, HuggingFaceStorageWriter
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch import nn

_STEP_DIR = re.compile(r"^step_(\d{8})$")
_OPTIM_OPTIONS = StateDictOptions(flatten_optimizer_state_dict=True)


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def _barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def step_dir(root: Path, step: int) -> Path:
    return Path(root) / f"step_{step:08d}"


def list_checkpoints(root: str | Path) -> list[Path]:
    """Committed checkpoints under ``root``, oldest first (``.tmp-*`` leftovers are not listed)."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and _STEP_DIR.match(p.name)]
    return sorted(found, key=lambda p: int(_STEP_DIR.match(p.name).group(1)))


def latest(root: str | Path) -> Path | None:
    """The newest committed checkpoint under ``root``, or None."""
    found = list_checkpoints(root)
    return found[-1] if found else None


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        json.dump(data, f, indent=1)
        f.flush()
        os.fsync(f.fileno())


def _fsync_tree(folder: Path) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            with path.open("rb") as f:
                os.fsync(f.fileno())
    _fsync_dir(folder)


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
    tmp = root / f".tmp-{final.name}"
    rank = _rank()
    if rank == 0:
        root.mkdir(parents=True, exist_ok=True)
        if tmp.exists():  # a save of this step that died earlier
            shutil.rmtree(tmp)
        tmp.mkdir()
    _barrier()
    tensors, optim_other = _gather_tensors(model, optimizer, ema)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")
        dcp.save(tensors, storage_writer=HuggingFaceStorageWriter(str(tmp / "tensors"), save_distributed=True))
    if rank_state is not None:
        key = rank if rank_key is None else rank_key
        _write_json(tmp / "ranks" / f"rank_{key:05d}.json", rank_state)
    _barrier()
    if rank == 0:
        _write_json(tmp / "state.json", {"step": step, "optimizer": optim_other, **(state or {})})
        _fsync_tree(tmp)
        if final.exists():  # re-saving a step that was committed before (e.g. after a resume)
            shutil.rmtree(final)
        os.rename(tmp, final)  # the commit
        _fsync_dir(root)
        if keep > 0:
            for old in list_checkpoints(root)[:-keep]:
                shutil.rmtree(old, ignore_errors=True)
    _barrier()
    return final


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _restore_tuples(template: dict[str, Any], loaded: dict[str, Any]) -> dict[str, Any]:
    return {k: (tuple(v) if isinstance(template.get(k), tuple) else v) for k, v in loaded.items()}


def load(
    path: str | Path,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    ema: Any = None,
    rank_key: int | None = None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Load a checkpoint into the (already parallelized) ``model``, ``optimizer`` and ``ema``.

    Works for any layout: DCP reads the slices this rank's tensors cover. Returns
    (global state, this rank's state or None when the checkpoint has no file for ``rank_key``).
    """
    path = Path(path)
    state_file = path / "state.json"
    if not state_file.is_file():
        raise FileNotFoundError(f"{path} is not a committed checkpoint (no state.json)")
    state = json.loads(state_file.read_text())
    tensors, _ = _gather_tensors(model, optimizer, ema)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")
        dcp.load(tensors, storage_reader=HuggingFaceStorageReader(str(path / "tensors")))
    set_model_state_dict(model, {k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")})
    if optimizer is not None:
        template = get_optimizer_state_dict(model, optimizer, options=_OPTIM_OPTIONS)
        flat = {k[len("optim."):]: v for k, v in tensors.items() if k.startswith("optim.")}
        flat.update(_restore_tuples(template, state["optimizer"]))
        set_optimizer_state_dict(model, optimizer, flat, options=_OPTIM_OPTIONS)
    if ema is not None:
        ema.load_state_dict({k[len("ema."):]: v for k, v in tensors.items() if k.startswith("ema.")})
    key = _rank() if rank_key is None else rank_key
    rank_file = path / "ranks" / f"rank_{key:05d}.json"
    rank_state = json.loads(rank_file.read_text()) if rank_file.is_file() else None
    return state, rank_state


def rank_states(path: str | Path) -> dict[int, dict[str, Any]]:
    """Every per-rank state in a checkpoint, by rank key (to remap when the layout changed)."""
    folder = Path(path) / "ranks"
    if not folder.is_dir():
        return {}
    return {int(p.stem.split("_")[1]): json.loads(p.read_text()) for p in sorted(folder.glob("rank_*.json"))}
