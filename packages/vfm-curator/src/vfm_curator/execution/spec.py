"""What a runner needs to build a stage in a worker: its class and options."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vfm_curator.stages.base import Resources, Stage


@dataclass(frozen=True)
class StageSpec:
    """A stage class and the options to build it with; ``resources`` overrides the class's."""

    cls: type[Stage]
    options: dict[str, Any] = field(default_factory=dict)
    resources: Resources | None = None

    @property
    def name(self) -> str:
        return self.cls.name

    @property
    def batch_size(self) -> int:
        return max(1, int(self.cls.batch_size))

    def declared(self) -> Resources:
        return self.resources or self.cls.resources

    def key(self) -> str:
        """Identifies one configured stage, so a worker process builds it (and its models) once."""
        return f"{self.cls.__module__}:{self.cls.__qualname__}:{sorted(self.options.items())!r}"

    def build(self) -> Stage:
        stage = self.cls(**self.options)
        stage.ensure_setup()
        return stage


_BUILT: dict[str, Stage] = {}


def cached_stage(spec: StageSpec) -> Stage:
    """The stage for ``spec`` in this process, built on first use (Ray reuses worker processes, so
    model-loading stages load once per worker, not once per task)."""
    key = spec.key()
    if key not in _BUILT:
        _BUILT[key] = spec.build()
    return _BUILT[key]
