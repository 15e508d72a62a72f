"""Model weights in safetensors: save, load, and load into a module with a clear mismatch error.

Loading never unpickles: safetensors holds raw tensors only, and ``.pt``/``.pth`` files are read
with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import os
import re
from os import PathLike
from pathlib import Path
from typing import Mapping

import torch
from torch import nn
from vfm_plugins.archives import TORCH_SAVE, check_stored_zip


class CheckpointMismatchError(ValueError):
    """The weights do not fit the model: lists missing and unexpected keys and differing shapes."""


class ShardedWeightsError(ValueError):
    """Weights held as DTensors (a model under FSDP or TP) given where whole tensors are written."""


def check_whole(state: Mapping[str, torch.Tensor], where: str) -> None:
    """Raise :class:`ShardedWeightsError` naming the DTensors of ``state``.

    Checked on the calling rank alone: gathering them here would be a collective, and a caller
    writing on rank 0 alone would wait for the other ranks forever."""
    if not torch.distributed.is_available():
        return
    from torch.distributed.tensor import DTensor

    sharded = [name for name, t in state.items() if isinstance(t, DTensor)]
    if sharded:
        shown = ", ".join(sharded[:3]) + (f" and {len(sharded) - 3} more" if len(sharded) > 3 else "")
        raise ShardedWeightsError(
            f"{where}: {len(sharded)} of {len(state)} weight tensors are DTensors, split over a device mesh by FSDP or TP "
            f"({shown}); a weights file holds whole tensors. Gather them on every rank first, "
            "torch.distributed.checkpoint.state_dict.get_model_state_dict(model, "
            "options=StateDictOptions(full_state_dict=True, cpu_offload=True)), and write that dict on rank 0; "
            "or save a vfm_parallel checkpoint and read it into an unsharded model with vfm_parallel.checkpoint.load_weights")


def save_state_dict(path: str | PathLike, state: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None = None) -> Path:
    """Write ``state`` to a safetensors file (on CPU, contiguous; tied tensors are stored once each)."""
    from safetensors import SafetensorError
    from safetensors.torch import save_file

    check_whole(state, f"refusing to write {path}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    seen: set[tuple[int, int]] = set()
    tensors: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        t = tensor.detach().to("cpu").contiguous()
        key = (t.untyped_storage().data_ptr(), t.storage_offset())
        # safetensors refuses tensors that share memory (tied weights): give repeats their own copy.
        tensors[name] = t.clone() if key in seen else t
        seen.add(key)
    try:
        save_file(tensors, str(path), metadata=dict(metadata or {}))
    except SafetensorError as exc:
        refused = _os_error_of(exc, path)
        if refused is None:
            raise
        raise refused from exc
    return path


def _os_error_of(exc: Exception, path: Path) -> OSError | None:
    """safetensors reports a failed write (a full disk) as ``SafetensorError('... I/O error: ... (os
    error 28)')``: the :class:`OSError` it is, so callers that handle disk errors handle it too (None
    for its other errors)."""
    found = re.search(r"os error (\d+)\)", str(exc))
    if found is None:
        return None
    code = int(found.group(1))
    return OSError(code, os.strerror(code), str(path))


def load_state_dict(path: str | PathLike, device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """Read a ``.safetensors`` file (or a ``.pt``/``.pth`` file with ``weights_only=True``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no weights file at {path}")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path), device=str(device))
    if path.suffix in (".pt", ".pth", ".bin"):
        check_stored_archive(path)
        state = torch.load(path, map_location=device, weights_only=True)
        if not isinstance(state, dict):
            raise ValueError(f"{path} does not hold a state dict (a mapping of names to tensors)")
        return state
    raise ValueError(f"unknown weights format {path.suffix!r} for {path}; accepted: .safetensors, .pt, .pth, .bin")


def check_stored_archive(path: str | PathLike) -> None:
    """Refuse a ``torch.save`` zip archive with compressed records before ``torch.load`` inflates them:
    torch.save stores records uncompressed, and a deflated one grows up to 1000x (a 10 MB download
    into a 10 GB tensor). Torch's legacy (non-zip) format holds its bytes as they are: accepted."""
    check_stored_zip(path, name=str(path), accepted=f"{TORCH_SAVE} (or safetensors)")


def read_metadata(path: str | PathLike) -> dict[str, str]:
    """The string metadata stored in a safetensors header."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return dict(f.metadata() or {})


def shape_of(value) -> tuple[int, ...]:
    """A tensor's shape, or a shape given as such."""
    return tuple(value.shape) if hasattr(value, "shape") else tuple(value)


def differences(model_state: Mapping[str, torch.Tensor], loaded: Mapping[str, torch.Tensor],
                shape_words: str = "{key}: weights {got} vs model {expected}") -> tuple[list[str], list[str], list[str]]:
    """(missing keys, unexpected keys, shape differences worded by ``shape_words``). Values are
    tensors or shapes."""
    missing = sorted(set(model_state) - set(loaded))
    unexpected = sorted(set(loaded) - set(model_state))
    shapes = [
        shape_words.format(key=k, got=shape_of(loaded[k]), expected=shape_of(model_state[k]))
        for k in sorted(set(model_state) & set(loaded))
        if shape_of(loaded[k]) != shape_of(model_state[k])
    ]
    return missing, unexpected, shapes


def mismatch(model_state: Mapping[str, torch.Tensor], loaded: Mapping[str, torch.Tensor],
             words: tuple[str, str] = ("missing from the weights", "not in the model"),
             shape_words: str = "{key}: weights {got} vs model {expected}") -> str:
    """A readable list of the differences between two state dicts ("" when keys and shapes agree);
    ``words`` name the missing and the unexpected keys. Values are tensors or shapes."""
    missing, unexpected, shapes = differences(model_state, loaded, shape_words)
    parts = []
    if missing:
        parts.append(f"{words[0]} ({len(missing)}): {_listed(missing)}")
    if unexpected:
        parts.append(f"{words[1]} ({len(unexpected)}): {_listed(unexpected)}")
    if shapes:
        parts.append(f"different shapes ({len(shapes)}): {_listed(shapes, sep='; ')}")
    return "\n".join(parts)


def _listed(names: list[str], limit: int = 20, sep: str = ", ") -> str:
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return sep.join(names[:limit]) + more


def load_into(module: nn.Module, weights: str | PathLike | Mapping[str, torch.Tensor], *, strict: bool = True) -> nn.Module:
    """Copy ``weights`` (a file or a state dict) into ``module``.

    With ``strict`` every key and shape must agree; otherwise a :class:`CheckpointMismatchError`
    names the missing and unexpected keys and the differing shapes. Non-strict loading still
    refuses differing shapes of shared keys.
    """
    source = str(weights) if isinstance(weights, (str, PathLike)) else "the given state dict"
    state = load_state_dict(weights) if isinstance(weights, (str, PathLike)) else dict(weights)
    own = module.state_dict()
    missing, unexpected, shapes = differences(own, state)
    if shapes or (strict and (missing or unexpected)):
        problems = mismatch(own, state)
        raise CheckpointMismatchError(f"weights from {source} do not fit {type(module).__name__}:\n{problems}")
    module.load_state_dict(state, strict=strict)
    return module
