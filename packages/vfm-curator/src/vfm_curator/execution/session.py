"""Starting or joining Ray: an embedded local instance by default, a cluster with an address.

Joining a cluster is bounded: Ray itself retries an unreachable address for minutes, so the address
is first probed over TCP for ``connect_timeout_s`` and a failure is a one-line error naming it.
"""

from __future__ import annotations

import os
import socket
import time


def ensure_ray(address: str | None = None, num_cpus: float | None = None, num_gpus: float | None = None, *,
               connect_timeout_s: float = 30.0) -> bool:
    """Connect to Ray unless this process already is; returns True when this call started it
    (so the caller shuts it down). A local instance gets no dashboard and ``num_cpus`` CPUs
    (default: this machine's count)."""
    import ray

    if ray.is_initialized():
        return False
    kwargs: dict = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if address:
        check_reachable(address, connect_timeout_s)
        kwargs["address"] = address
    else:
        kwargs["num_cpus"] = num_cpus or os.cpu_count() or 1
        if num_gpus is not None:
            kwargs["num_gpus"] = num_gpus
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, TimeoutError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        where = f"the Ray cluster at {address!r}" if address else "a local Ray instance"
        raise ValueError(f"cannot start or join {where}: {first}") from exc
    return True


def check_reachable(address: str, timeout_s: float) -> None:
    """``host:port`` (or ``ray://host:port``) must accept a TCP connection within ``timeout_s``;
    ``auto`` and ``local`` are left to Ray (they read this machine's running instance)."""
    if address in ("auto", "local"):
        return
    target = address.split("://", 1)[-1]
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"--ray-address {address!r}: accepted: host:port, ray://host:port, auto")
    deadline = time.monotonic() + timeout_s
    last: OSError | None = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=min(left, 5.0)):
                return
        except OSError as exc:
            last = exc
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
    raise ValueError(f"cannot reach the Ray cluster at {address!r} within {timeout_s:g} s ({last}); "
                     "is `ray start --head` running there? (run.connect_timeout_s sets the wait)")


def cluster_budget() -> tuple[float, float]:
    """(CPUs, GPUs) of the connected cluster."""
    import ray

    res = ray.cluster_resources()
    return float(res.get("CPU", 1.0)), float(res.get("GPU", 0.0))
