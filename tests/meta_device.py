"""Helpers for the device-placement tests, which run real code on the ``meta`` device: a tensor made
on the CPU then meets a meta tensor and fails as it would meet a CUDA tensor, and a host sync
(``.item()``, ``bool(t)``, ``.tolist()``) raises "cannot be called on meta tensors". What meta lets
through, a CPU tensor *copied* onto the device (on CUDA a pageable copy that waits for the stream),
:class:`HostCopies` records, so a test can say how often it may happen."""

from __future__ import annotations

import subprocess
import sys
import traceback
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

ROOT = Path(__file__).resolve().parents[1]
META = torch.device("meta")


#: the calls that copy their first argument to a device (``copy_`` copies its second)
_MOVES = (torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.type_as, torch.as_tensor, torch.asarray, torch.tensor)


class HostCopies(TorchFunctionMode):
    """Records each CPU tensor copied onto the meta device (:data:`_MOVES`, ``Tensor.copy_``) with the
    package lines that asked for it. A function mode, so it also sees copies under inference mode."""

    def __init__(self) -> None:
        super().__init__()
        self.copies: list[tuple[tuple[int, ...], list[str]]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if (func in _MOVES and args and isinstance(args[0], torch.Tensor) and args[0].device.type == "cpu"
                and isinstance(out, torch.Tensor)):
            source, target = args[0], out
        elif func is torch.Tensor.copy_ and isinstance(args[1], torch.Tensor) and args[1].device.type == "cpu":
            source, target = args[1], args[0]
        else:
            return out
        if target.device.type == "meta":
            where = [f"{f.filename.split('/src/')[-1]}:{f.lineno}" for f in traceback.extract_stack() if "/src/" in f.filename]
            self.copies.append((tuple(source.shape), where[-3:]))
        return out


class MetaGenerator(torch.Generator):
    """A seeded CPU generator that says it is on ``meta`` (torch makes no generator there; meta draws
    take any): draws made with ``device=generator.device`` land on meta, as they land on CUDA with
    the CUDA generator a run there gets."""

    @property
    def device(self) -> torch.device:
        return META


def in_subprocess(module: str, call: str) -> subprocess.CompletedProcess:
    """``module.call`` in a fresh interpreter, for set-ups that change the process for good: patched
    module attributes, torch's fake process group as the default group. Asserts that it succeeded."""
    code = f"import {module} as t; t.{call}"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]  # the check's own message: the tail of its traceback
    return done
