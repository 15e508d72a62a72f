"""Communication accounting: bytes moved per collective kind (and per layer), readable after a step.

Strategies call :func:`record` next to each collective they issue; tests and benchmarks read
:func:`snapshot` to check the bytes against the formulas (e.g. seed table 2 for CP). Counts are per
process (this rank's send volume); nothing here communicates.

    comm_stats.reset()
    loss.backward()
    comm_stats.snapshot()   # {"all_reduce": {"total": 4096, "by_layer": {"pp.conditioning": 4096}}, ...}
"""

from __future__ import annotations

import threading
from collections import defaultdict

_lock = threading.Lock()
_bytes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
_calls: dict[str, int] = defaultdict(int)


def record(kind: str, layer: str, nbytes: int) -> None:
    """Count ``nbytes`` moved by one collective of ``kind`` (e.g. ``"all_to_all"``, ``"p2p"``,
    ``"all_reduce"``, ``"all_gather"``, ``"reduce_scatter"``) issued for ``layer``."""
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    with _lock:
        _bytes[kind][layer] += int(nbytes)
        _calls[kind] += 1


def tensor_bytes(tensor) -> int:
    """Bytes held by ``tensor`` (``numel * element_size``)."""
    return tensor.numel() * tensor.element_size()


def snapshot() -> dict[str, dict]:
    """``{kind: {"total": bytes, "calls": n, "by_layer": {layer: bytes}}}`` since the last reset."""
    with _lock:
        return {
            kind: {"total": sum(layers.values()), "calls": _calls[kind], "by_layer": dict(layers)}
            for kind, layers in _bytes.items()
        }


def total(kind: str | None = None) -> int:
    """Bytes recorded for ``kind`` (all kinds when None)."""
    with _lock:
        kinds = [kind] if kind is not None else list(_bytes)
        return sum(sum(_bytes[k].values()) for k in kinds if k in _bytes)


def reset() -> None:
    """Forget everything recorded so far (call at the start of the step you want to measure)."""
    with _lock:
        _bytes.clear()
        _calls.clear()
