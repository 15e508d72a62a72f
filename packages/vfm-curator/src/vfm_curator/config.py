"""Configuration of a clipping run: which stages, their options, and how to execute them.

``--config FILE`` takes TOML or JSON with the same shape as :meth:`CurateConfig.from_dict`::

    stages = ["decode", "split", "stitch", "transcode", "embed", "caption", "filter", "write"]
    [run]
    runner = "ray"          # or "serial" (in-process, no Ray)
    ray_address = ""        # empty: an embedded local Ray; else a cluster address
    num_cpus = 0            # local Ray's CPUs (0: this machine's count)
    queue_size = 2
    [options.split]
    method = "content"
    threshold = 27.0
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_STAGES = ("decode", "split", "stitch", "transcode", "embed", "caption", "filter", "write")
RUN_KEYS = {"runner", "ray_address", "num_cpus", "num_gpus", "queue_size", "balance_interval_s", "workers"}


@dataclass
class CurateConfig:
    stages: list[str] = field(default_factory=lambda: list(DEFAULT_STAGES))
    options: dict[str, dict[str, Any]] = field(default_factory=dict)  # per stage name
    runner: str = "ray"
    ray_address: str | None = None
    num_cpus: float | None = None
    num_gpus: float | None = None
    queue_size: int = 2
    balance_interval_s: float = 2.0
    workers: dict[str, int] = field(default_factory=dict)  # fixed worker counts (bypass the balancer)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CurateConfig":
        unknown = set(data) - {"stages", "options", "run"}
        if unknown:
            raise ValueError(f"config: unknown section(s) {', '.join(sorted(unknown))}; accepted: stages, options, run")
        run = dict(data.get("run", {}))
        bad = set(run) - RUN_KEYS
        if bad:
            raise ValueError(f"config [run]: unknown key(s) {', '.join(sorted(bad))}; accepted: {', '.join(sorted(RUN_KEYS))}")
        if run.get("runner", "ray") not in ("ray", "serial"):
            raise ValueError(f"config [run] runner must be 'ray' or 'serial', got {run['runner']!r}")
        options = data.get("options", {})
        if not isinstance(options, dict) or not all(isinstance(v, dict) for v in options.values()):
            raise ValueError("config: 'options' must map stage names to tables of options")
        cfg = cls(options={k: dict(v) for k, v in options.items()}, **{k: v for k, v in run.items()})
        if "stages" in data:
            cfg.stages = list(data["stages"])
        cfg.ray_address = cfg.ray_address or None
        cfg.num_cpus = cfg.num_cpus or None
        return cfg

    @classmethod
    def load(cls, path: str | Path) -> "CurateConfig":
        path = Path(path)
        if path.suffix.lower() == ".json":
            return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))
        if path.suffix.lower() == ".toml":
            import tomllib

            return cls.from_dict(tomllib.loads(path.read_text(encoding="utf-8")))
        raise ValueError(f"config {path}: unsupported format {path.suffix!r}; accepted: .toml, .json")

    def stage_options(self, name: str) -> dict[str, Any]:
        return dict(self.options.get(name, {}))
