"""Decoder backends, a plugin kind (``vfm_curator_register_decoders``): PyAV on the CPU, PyAV's CUDA
hwaccel, NVDEC through PyNvVideoCodec, NVIDIA DALI. Each gives the frames PyAV gives (display order,
upright, RGB uint8, presentation times in seconds), as numpy arrays on the CPU or torch tensors on
the GPU. ``auto`` measures the installed ones on the first video and keeps the fastest.

>>> from vfm_curator.decoders import create
>>> decoder = create("auto", probe_path="video.mp4")     # doctest: +SKIP
>>> for t, frame in decoder.frames("video.mp4", (64, 36)): ...   # doctest: +SKIP
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from vfm_curator.decoders.base import Decoder, Size, StreamFacts, container_times, stream_facts

__all__ = [
    "AUTO",
    "Choice",
    "Decoder",
    "Size",
    "StreamFacts",
    "availability",
    "check_name",
    "choose",
    "container_times",
    "create",
    "decoder_class",
    "decoder_names",
    "measure",
    "stream_facts",
]

AUTO = "auto"


def _targets() -> dict[str, Any]:
    """name -> registry entry (the built-ins of ``plugins.toml`` and third-party plugins)."""
    from vfm_curator.plugins import host

    return host.entries("decoders")


def decoder_names() -> list[str]:
    """The registered backend names (``auto`` is not one: it picks among them)."""
    return sorted(_targets())


def check_name(name: Any) -> str:
    """``name`` if it is ``auto`` or a registered backend, else a ValueError listing the accepted ones."""
    names = decoder_names()
    if name == AUTO or name in names:
        return name
    raise ValueError(f"unknown decoder {name!r}; accepted: {', '.join([AUTO, *names])}")


def decoder_class(name: str) -> type[Decoder]:
    """The backend class registered as ``name`` (unknown names: a ValueError listing the accepted)."""
    from vfm_curator.plugins import host
    from vfm_plugins import Entry, PluginLoadError

    if check_name(name) == AUTO:
        raise ValueError("'auto' is not a backend: choose() or create() picks one")
    target = _targets()[name]
    if not isinstance(target, Entry):  # a class in place of the registry's entry
        return target
    cls = host.get("decoders", name)  # checks what a decoder requires (plugins.toml), naming a plugin's gap
    if not isinstance(cls, type):
        entry = host.entry("decoders", name)
        raise PluginLoadError(f"decoder {name!r} (from {entry.provider} {entry.version}) is registered as an "
                              f"instance of {type(cls).__name__}; register the Decoder subclass itself")
    _check_decode_signature(name, cls)
    return cls


def _check_decode_signature(name: str, cls: type) -> None:
    """``decode(self, path, sizes)`` takes both arguments: ``def decode(self, path)`` failed every video, each
    blamed on the video, with Python's ``takes 2 positional arguments but 3 were given``."""
    from vfm_curator.plugins import host
    from vfm_plugins import PluginLoadError, refused_signature

    signature = refused_signature(cls.decode, 3)  # self, path, sizes
    if signature is not None:
        entry = host.entry("decoders", name)
        raise PluginLoadError(f"decoder {name!r} (from {entry.provider} {entry.version}, class {cls.__module__}."
                              f"{cls.__qualname__}): its decode{signature} cannot take (path, sizes); a decoder "
                              "defines decode(self, path, sizes) yielding (time_s, [one frame per size])")


def availability() -> dict[str, tuple[bool, str]]:
    """Every registered backend -> ``(available here, what / why not)``."""
    out = {}
    for name in decoder_names():
        try:
            out[name] = decoder_class(name).available()
        except Exception as exc:  # noqa: BLE001 - a broken plugin is "not available", not a crash
            out[name] = (False, f"{type(exc).__name__}: {exc}")
    return out


def measure(backend: str | Decoder, path: str, frames: int = 64, size: Size = None, *, warmup: int = 4) -> float:
    """Decode-only frames per second of ``backend`` on the first ``frames`` frames of ``path`` at
    ``size`` (``None``: full size), with the decoder's start-up (opening the file) inside the timed
    part; ``warmup`` frames are decoded first, untimed, so one-off costs (CUDA context, library
    loading) do not count. GPU work is waited for before the clock stops."""
    decoder = create(backend) if isinstance(backend, str) else backend
    if frames < 1:
        raise ValueError(f"frames must be >= 1, got {frames}")
    if warmup > 0:
        _decode_n(decoder, path, warmup, size)
    t0 = time.perf_counter()
    n = _decode_n(decoder, path, frames, size)
    seconds = time.perf_counter() - t0
    return n / seconds if seconds > 0 else float("inf")


def _decode_n(decoder: Decoder, path: str, frames: int, size: Size) -> int:
    n, last = 0, None
    stream = decoder.frames(path, size)
    try:
        for _, last in stream:
            n += 1
            if n >= frames:
                break
    finally:
        stream.close()
    if decoder.uses_gpu and last is not None:
        import torch

        torch.cuda.synchronize(last.device)
    return n


@dataclass(frozen=True)
class Choice:
    """What ``auto`` picked and why: ``fps`` per measured backend, ``skipped`` those not available."""

    name: str
    reason: str
    fps: dict[str, float] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


_CHOICES: dict[tuple, Choice] = {}
_LOCK = threading.Lock()


def choose(probe_path: str | None = None, *, frames: int = 64, size: Size = None) -> Choice:
    """The fastest available backend, measured once per process (cached by the set of candidates):
    a timed decode of the first ``frames`` frames of ``probe_path`` at ``size`` with each. With one
    candidate (every machine without a GPU: only ``pyav``), or without ``probe_path``, nothing is
    measured: ``pyav`` when it is available, else the first available one."""
    status = availability()
    candidates = [n for n, (ok, _) in status.items() if ok]
    skipped = {n: why for n, (ok, why) in status.items() if not ok}
    if not candidates:
        raise RuntimeError("no decoder backend is available: " + "; ".join(f"{n}: {w}" for n, w in skipped.items()))
    key = (tuple(candidates), size)
    with _LOCK:
        if key in _CHOICES:
            return _CHOICES[key]
        if len(candidates) == 1 or probe_path is None:
            name = "pyav" if "pyav" in candidates else candidates[0]
            why = "the only available backend" if len(candidates) == 1 else "nothing to measure on"
            choice = Choice(name, why, {}, skipped)
        else:
            fps: dict[str, float] = {}
            for name in candidates:
                try:
                    fps[name] = measure(name, probe_path, frames, size)
                except Exception as exc:  # noqa: BLE001 - a backend that fails here is not chosen
                    skipped[name] = f"failed on {probe_path}: {type(exc).__name__}: {exc}"
            if not fps:
                raise RuntimeError("every decoder backend failed on " + str(probe_path) + ": "
                                   + "; ".join(f"{n}: {skipped[n]}" for n in candidates))
            best = max(fps, key=fps.get)
            figures = ", ".join(f"{n} {v:.0f}" for n, v in sorted(fps.items(), key=lambda kv: -kv[1]))
            choice = Choice(best, f"fastest measured (frames/s: {figures})", fps, skipped)
        _CHOICES[key] = choice
        return choice


def create(name: str | Decoder = AUTO, *, probe_path: str | None = None, size: Size = None,
           device: str | None = None) -> Decoder:
    """A decoder: a backend by name, or ``auto`` (:func:`choose`, measured on ``probe_path``)."""
    if isinstance(name, Decoder):
        return name
    name = check_name(name)
    if name == AUTO:
        name = choose(probe_path, size=size).name
    cls = decoder_class(name)
    ok, why = cls.available()
    if not ok:
        raise RuntimeError(f"decoder {name!r} is not available here: {why}")
    return cls(device=device)
