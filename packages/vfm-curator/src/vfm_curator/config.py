"""Configuration of a clipping run: which stages, their options, and how to execute them.

``--config FILE`` takes TOML or JSON with the same shape as :meth:`CurateConfig.from_dict`::

    stages = ["decode", "split", "stitch", "transcode", "embed", "caption", "filter", "write"]
    [run]
    runner = "ray"          # or "serial" (in-process, no Ray)
    ray_address = ""        # empty: an embedded local Ray; else a cluster address
    num_cpus = 0            # local Ray's CPUs (0: this machine's count)
    queue_size = 2
    max_attempts = 3        # tries of a video whose worker crashed, ran out of memory or timed out
    stage_timeout_s = 3600  # a stage call running longer is cancelled (Ray runner): cause "machine"
    connect_timeout_s = 30  # how long to try reaching --ray-address before a one-line error
    [options.split]
    method = "content"
    threshold = 27.0
    [dedup]                 # semantic dedup over the whole folder (vfm_curator.pipelines.review)
    enabled = false
    threshold = 0.95        # cosine similarity of clip embeddings at or above which clips are duplicates
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_STAGES = ("decode", "split", "stitch", "transcode", "embed", "caption", "filter", "write")
RUN_KEYS = {"runner", "ray_address", "num_cpus", "num_gpus", "queue_size", "balance_interval_s", "workers",
            "max_attempts", "stage_timeout_s", "connect_timeout_s"}

#: ``[dedup]``: semantic dedup over the whole folder (vfm_curator.pipelines.review); off unless asked for
#: (it takes clips out of clips.parquet).
DEDUP_DEFAULTS: dict[str, Any] = {"enabled": False, "threshold": 0.95, "buckets": 0, "chunk": 1024, "seed": 0}


def dedup_options(options: dict[str, Any] | None) -> dict[str, Any]:
    """``[dedup]`` merged over the defaults, each value checked (``ValueError`` naming it)."""
    options = dict(options or {})
    unknown = set(options) - set(DEDUP_DEFAULTS)
    if unknown:
        raise ValueError(f"config [dedup]: unknown key(s) {', '.join(sorted(unknown))}; accepted: {', '.join(DEDUP_DEFAULTS)}")
    o = {**DEDUP_DEFAULTS, **options}
    if not isinstance(o["enabled"], bool):
        raise ValueError(f"config [dedup] enabled = {o['enabled']!r}; accepted: true or false")
    t = o["threshold"]
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= 1:
        raise ValueError(f"config [dedup] threshold = {t!r}; accepted: a cosine similarity in (0, 1]")
    for key, lo in (("buckets", 0), ("chunk", 1), ("seed", 0)):
        v = o[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"config [dedup] {key} = {v!r}; accepted: an integer >= {lo}")
    return o


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
    max_attempts: int = 3  # tries of a video failed by the machine (crash, out of memory, timeout)
    stage_timeout_s: float = 3600.0  # longest one stage call may run (Ray runner)
    connect_timeout_s: float = 30.0  # longest wait to reach a Ray cluster at ray_address
    dedup: dict[str, Any] = field(default_factory=dict)  # [dedup]: see DEDUP_DEFAULTS

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CurateConfig":
        unknown = set(data) - {"stages", "options", "run", "dedup"}
        if unknown:
            raise ValueError(f"config: unknown section(s) {', '.join(sorted(unknown))}; accepted: stages, options, run, dedup")
        run = dict(data.get("run", {}))
        bad = set(run) - RUN_KEYS
        if bad:
            raise ValueError(f"config [run]: unknown key(s) {', '.join(sorted(bad))}; accepted: {', '.join(sorted(RUN_KEYS))}")
        if run.get("runner", "ray") not in ("ray", "serial"):
            raise ValueError(f"config [run] runner must be 'ray' or 'serial', got {run['runner']!r}")
        options = data.get("options", {})
        if not isinstance(options, dict) or not all(isinstance(v, dict) for v in options.values()):
            raise ValueError("config: 'options' must map stage names to tables of options")
        if not isinstance(data.get("dedup", {}), dict):
            raise ValueError("config: 'dedup' must be a table (enabled, threshold, buckets, chunk, seed)")
        cfg = cls(options={k: dict(v) for k, v in options.items()}, dedup=dict(data.get("dedup", {})),
                  **{k: v for k, v in run.items()})
        if "stages" in data:
            cfg.stages = list(data["stages"])
        cfg.ray_address = cfg.ray_address or None
        cfg.num_cpus = cfg.num_cpus or None
        return cfg

    @classmethod
    def load(cls, path: str | Path) -> "CurateConfig":
        return cls.from_dict(read_config_file(path))

    def stage_options(self, name: str) -> dict[str, Any]:
        return dict(self.options.get(name, {}))

    def check(self) -> None:
        """Range-check the ``[run]`` values and the stage names (``ValueError`` naming the value and
        what is accepted). Stage options are checked when the stages are built (``Stage.check_options``);
        :func:`vfm_curator.pipelines.clipping.stage_specs` does both, before any work."""
        from vfm_curator.plugins import host

        def number(key: str, value: Any, *, lo: float, lo_open: bool = False, integer: bool = False) -> None:
            kind = "an integer" if integer else "a number"
            ok = isinstance(value, int) if integer else isinstance(value, (int, float))
            if isinstance(value, bool) or not ok or value != value or (value <= lo if lo_open else value < lo):
                raise ValueError(f"config [run] {key} = {value!r}; accepted: {kind} {'>' if lo_open else '>='} {lo:g}")

        if not isinstance(self.stages, list) or not all(isinstance(s, str) for s in self.stages) or not self.stages:
            raise ValueError(f"config: stages must be a non-empty list of stage names; got {self.stages!r}")
        known = host.names("stages")
        unknown = [s for s in self.stages if s not in known]
        if unknown:
            raise ValueError(f"config: unknown stage(s) {', '.join(map(repr, unknown))}; available: {', '.join(known)}")
        stray = sorted(set(self.options) - set(self.stages))
        if stray:
            raise ValueError(f"config [options.{stray[0]}]: no stage {stray[0]!r} in this pipeline; stages: {', '.join(self.stages)}")
        number("queue_size", self.queue_size, lo=1, integer=True)
        dedup_options(self.dedup)
        number("balance_interval_s", self.balance_interval_s, lo=0, lo_open=True)
        number("max_attempts", self.max_attempts, lo=1, integer=True)
        number("stage_timeout_s", self.stage_timeout_s, lo=0, lo_open=True)
        number("connect_timeout_s", self.connect_timeout_s, lo=0, lo_open=True)
        if self.num_cpus is not None:
            number("num_cpus", self.num_cpus, lo=0, lo_open=True)
        if self.num_gpus is not None:
            number("num_gpus", self.num_gpus, lo=0)
        if self.ray_address is not None and not isinstance(self.ray_address, str):
            raise ValueError(f"config [run] ray_address = {self.ray_address!r}; accepted: a string (host:port, ray://host:port, auto)")
        if not isinstance(self.workers, dict):
            raise ValueError(f"config [run] workers = {self.workers!r}; accepted: a table of stage = count")
        for name, count in self.workers.items():
            if name not in self.stages:
                raise ValueError(f"config [run] workers: no stage {name!r} in this pipeline; stages: {', '.join(self.stages)}")
            number(f"workers.{name}", count, lo=1, integer=True)


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A ``.toml`` or ``.json`` config file as a dict; a missing file, a folder, another format or a
    syntax error is a ``ValueError`` naming the file (and the line, for TOML)."""
    import tomllib

    path = Path(path)
    if path.suffix.lower() not in (".toml", ".json"):
        raise ValueError(f"config {path}: unsupported format {path.suffix!r}; accepted: .toml, .json")
    if not path.is_file():
        raise ValueError(f"config {path} {'is a folder' if path.is_dir() else 'does not exist'}; accepted: a .toml or .json file")
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"config {path} is not valid {path.suffix.lower()[1:].upper()}: {exc}") from None
