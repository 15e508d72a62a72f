"""Starting or joining Ray: an embedded local instance by default, a cluster with an address."""

from __future__ import annotations

import os


def ensure_ray(address: str | None = None, num_cpus: float | None = None, num_gpus: float | None = None) -> bool:
    """Connect to Ray unless this process already is; returns True when this call started it
    (so the caller shuts it down). A local instance gets no dashboard and ``num_cpus`` CPUs
    (default: this machine's count)."""
    import ray

    if ray.is_initialized():
        return False
    kwargs: dict = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if address:
        kwargs["address"] = address
    else:
        kwargs["num_cpus"] = num_cpus or os.cpu_count() or 1
        if num_gpus is not None:
            kwargs["num_gpus"] = num_gpus
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    ray.init(**kwargs)
    return True


def cluster_budget() -> tuple[float, float]:
    """(CPUs, GPUs) of the connected cluster."""
    import ray

    res = ray.cluster_resources()
    return float(res.get("CPU", 1.0)), float(res.get("GPU", 0.0))
