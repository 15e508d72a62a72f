"""What a model family registers: its config type, its size presets, and how to build it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from vfm_plugins import PluginError
from vfm_plugins.text import did_you_mean


class PresetError(PluginError):
    """A family's preset sets a key its config class does not have: the family author's mistake, not
    the user's options (so no ``TypeError``: ``vfm train`` must not report it as a bad ``model.options``)."""


class FamilyDefinitionError(PluginError, TypeError):
    """A ``ModelFamily`` whose ``build`` cannot be called as ``build(config)``: the family author's mistake."""


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
        accepted = {f.name for f in dataclasses.fields(self.config_cls) if f.init}
        if preset is not None:
            if preset not in self.presets:
                raise KeyError(
                    f"family {self.name!r} has no preset {preset!r}; presets: {', '.join(sorted(self.presets))}"
                )
            values.update(self.presets[preset])
            wrong = sorted(set(values) - accepted)
            if wrong:  # checked apart from the user's keys: each error says whose mistake it is
                cls = self.config_cls
                raise PresetError(
                    f"family {self.name!r}{self._provider()}: its preset {preset!r} sets {', '.join(wrong)}, which "
                    f"its config class {cls.__module__}.{cls.__qualname__} has no field for (a bug in the family's "
                    f"plugin, not in your options); the preset's keys must be among: {', '.join(sorted(accepted))}")
        unknown = sorted(set(overrides) - accepted)
        if unknown:
            named = ", ".join(key + did_you_mean(key, accepted) for key in unknown)
            raise TypeError(f"family {self.name!r} has no config key(s) {named}; keys: {', '.join(sorted(accepted))}")
        values.update(overrides)
        return self.config_cls(**values)

    def __post_init__(self) -> None:
        # vfm builds every model as build(config): a build that cannot take that one argument failed
        # as a TypeError traceback from vfm train, far from the ModelFamily(...) that set it
        from vfm_plugins import refused_signature

        signature = refused_signature(self.build, 1)
        if signature is not None:
            raise FamilyDefinitionError(
                f"family {self.name!r}: build = {getattr(self.build, '__qualname__', self.build)}{signature} cannot "
                f"take the config; build(config) is called with the config alone and returns the model (a model "
                f"class taking the config, or a function of it)")

    def _provider(self) -> str:
        """`` (from acme-vfm 0.3.0)`` where the family is registered under its name, else ``""``."""
        import vfm_models

        try:
            entry = vfm_models.host.entry("families", self.name)
        except Exception:  # noqa: BLE001 - a family used without registering it: no provider to name
            return ""
        return f" (from {entry.provider} {entry.version})"

    def create(self, preset: str | None = None, **overrides: Any) -> Any:
        """Build the model of ``preset`` with ``overrides``: ``family.create("S", depth=4)``."""
        return self.build(self.config(preset, **overrides))
