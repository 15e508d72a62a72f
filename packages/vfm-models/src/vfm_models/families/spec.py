"""What a model family registers: its config type, its size presets, and how to build it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping


@dataclass(frozen=True)
class ModelFamily:
    """A named architecture with size presets.

    ``config_cls`` is a dataclass of hyper-parameters; ``build(config)`` returns an ``nn.Module``
    whose ``parallel_plan()`` describes how vfm-parallel may split it (see
    :class:`vfm_models.families.plan.ParallelPlan`).
    """

    name: str
    config_cls: type
    build: Callable[[Any], Any]
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    description: str = ""

    def config(self, preset: str | None = None, **overrides: Any) -> Any:
        """A config from a preset (or the dataclass defaults) with ``overrides`` applied.

        Unknown presets and unknown keys are errors that list what is accepted.
        """
        values: dict[str, Any] = {}
        if preset is not None:
            if preset not in self.presets:
                raise KeyError(
                    f"family {self.name!r} has no preset {preset!r}; presets: {', '.join(sorted(self.presets))}"
                )
            values.update(self.presets[preset])
        accepted = {f.name for f in dataclasses.fields(self.config_cls)}
        unknown = sorted(set(overrides) - accepted)
        if unknown:
            raise TypeError(
                f"family {self.name!r} has no config key(s) {', '.join(unknown)}; keys: {', '.join(sorted(accepted))}"
            )
        values.update(overrides)
        return self.config_cls(**values)

    def create(self, preset: str | None = None, **overrides: Any) -> Any:
        """Build the model of ``preset`` with ``overrides``: ``family.create("S", depth=4)``."""
        return self.build(self.config(preset, **overrides))
