"""The plugin host: one pluggy host per vfm package, with a registry of named specs per kind.

Built-in plugins and third-party entry points register through the same ``register`` callback;
every host shares this code and the errors of :mod:`vfm_plugins.errors`.
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import os
import threading
import warnings
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Iterable, Protocol

import pluggy

from vfm_plugins.errors import DuplicateNameError, PluginError, UnknownNameError

if TYPE_CHECKING:
    from vfm_plugins.declaration import Declaration

#: Set to 1/true/yes to stop every vfm host from autoloading third-party entry points.
#: Built-in plugins always load. Set to a comma-separated list of host names (e.g.
#: ``vfm_models,vfm_infer``) to switch off only those hosts.
DISABLE_ENV = "VFM_DISABLE_PLUGIN_AUTOLOAD"


class Register(Protocol):
    """The callback every hook receives: call it once per thing you provide. ``target`` is the
    object itself or a lazy ``"module:attr"`` string imported only when the name is used."""

    def __call__(self, name: str, target: Any, *, description: str = "") -> None: ...


@dataclass(frozen=True)
class Entry:
    """One registered spec: what it is, who provided it, and the thing itself (or its import path)."""

    kind: str
    name: str
    target: Any
    provider: str
    version: str
    description: str = ""

    def load(self) -> Any:
        """The registered object; a ``"module:attr"`` string target is imported on first use."""
        if isinstance(self.target, str) and ":" in self.target:
            module_name, _, attr = self.target.partition(":")
            obj: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
            return obj
        return self.target


@dataclass(frozen=True)
class FailedPlugin:
    """A plugin that could not be loaded or whose hook raised; the rest keeps working."""

    host: str
    name: str
    provider: str
    version: str
    error: str


@dataclass
class _Provider:
    name: str
    version: str


def _distribution_version(dist_name: str) -> str:
    try:
        return metadata.version(dist_name)
    except metadata.PackageNotFoundError:
        return "unknown"


def _singular(kind: str) -> str:
    """``families`` -> ``family``, ``text_encoders`` -> ``text encoder``: for error messages."""
    words = kind.replace("_", " ")
    if words.endswith("ies"):
        return words[:-3] + "y"
    return words[:-1] if words.endswith("s") else words


def autoload_disabled(host: str) -> bool:
    """Whether third-party autoloading is switched off for ``host`` by :data:`DISABLE_ENV`."""
    value = os.environ.get(DISABLE_ENV, "").strip().lower()
    if value in ("1", "true", "yes", "all"):
        return True
    return host.lower() in {part.strip() for part in value.split(",") if part.strip()}


@dataclass
class PluginHost:
    """A pluggy host: a hookspec module, built-in plugins, and one registry per kind.

    ``project`` is the pluggy project name, the entry-point group and the hook prefix;
    ``distribution`` the package that provides the built-ins: those its ``declaration`` (the
    package's ``plugins.toml``, :mod:`vfm_plugins.declaration`) lists, registered through the
    hooks like any plugin, and those of the hookimpl modules named in ``builtins``. ``kinds`` maps
    each kind name (e.g. ``"families"``) to the hook that fills it (e.g.
    ``"vfm_models_register_families"``); left out, it is every ``<project>_register_<kind>``
    hookspec, in the order ``hookspecs`` defines them. Every hook takes one argument, ``register``
    (a :class:`Register`); a lazy ``"module:attr"`` target keeps listing plugins cheap.
    """

    project: str
    distribution: str
    hookspecs: ModuleType
    builtins: tuple[str, ...] = ()
    kinds: dict[str, str] = field(default_factory=dict)
    declaration: Declaration | None = None
    _entries: dict[str, dict[str, Entry]] | None = field(default=None, init=False, repr=False)
    _failed: list[FailedPlugin] = field(default_factory=list, init=False, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.kinds:
            prefix = f"{self.project}_register_"
            self.kinds = {name[len(prefix):]: name for name, spec in vars(self.hookspecs).items()
                          if name.startswith(prefix) and callable(spec)}

    # --- loading -------------------------------------------------------------------------------

    def plugin_manager(self) -> tuple[pluggy.PluginManager, dict[str, _Provider]]:
        """A fresh manager with the built-ins and (unless disabled) the entry-point plugins."""
        pm = pluggy.PluginManager(self.project)
        pm.add_hookspecs(self.hookspecs)
        providers: dict[str, _Provider] = {}
        own = _Provider(self.distribution, _distribution_version(self.distribution))
        if self.declaration is not None:
            pm.register(self.declaration.builtin_plugin(), name=self.declaration.source)
            providers[self.declaration.source] = own
        for module_name in self.builtins:
            module = importlib.import_module(module_name)
            pm.register(module, name=module_name)
            providers[module_name] = own
        if not autoload_disabled(self.project):
            for ep in self._entry_points():
                dist = ep.dist.name if ep.dist is not None else "unknown"
                version = ep.dist.version if ep.dist is not None else "unknown"
                plugin_name = f"{dist}:{ep.name}"
                if pm.has_plugin(plugin_name):
                    continue
                try:
                    plugin = ep.load()
                    pm.register(plugin, name=plugin_name)
                except Exception as exc:  # a broken plugin must not break the tool
                    self._fail(plugin_name, dist, version, f"failed to load: {exc!r}")
                    continue
                providers[plugin_name] = _Provider(dist, version)
        return pm, providers

    def _entry_points(self) -> Iterable[metadata.EntryPoint]:
        seen: set[tuple[str, str]] = set()
        for ep in metadata.entry_points(group=self.project):
            key = (ep.name, ep.value)
            if key not in seen:  # editable installs can expose the same distribution twice
                seen.add(key)
                yield ep

    def _fail(self, plugin_name: str, dist: str, version: str, error: str) -> None:
        self._failed.append(FailedPlugin(self.project, plugin_name, dist, version, error))
        warnings.warn(f"{self.project}: plugin {plugin_name!r} ({dist} {version}) {error}", stacklevel=3)

    def _load(self) -> dict[str, dict[str, Entry]]:
        with self._lock:
            if self._entries is not None:
                return self._entries
            self._failed = []
            pm, providers = self.plugin_manager()
            entries: dict[str, dict[str, Entry]] = {kind: {} for kind in self.kinds}
            for kind, hook_name in self.kinds.items():
                hook = getattr(pm.hook, hook_name)
                # pluggy calls the most recently registered first; register built-ins first.
                for impl in reversed(hook.get_hookimpls()):
                    provider = providers[impl.plugin_name]
                    staged: dict[str, Entry] = {}
                    register = self._register_callback(kind, provider, entries[kind], staged)
                    try:
                        impl.function(register=register)
                    except DuplicateNameError:
                        raise
                    except Exception as exc:
                        self._fail(impl.plugin_name, provider.name, provider.version, f"raised in {hook_name}: {exc!r}")
                        continue
                    entries[kind].update(staged)
            self._entries = entries
            return entries

    def _register_callback(
        self, kind: str, provider: _Provider, existing: dict[str, Entry], staged: dict[str, Entry]
    ) -> Register:
        def register(name: str, target: Any, *, description: str = "") -> None:
            if not isinstance(name, str) or not name:
                raise PluginError(f"{self.project}: a {kind} name must be a non-empty string, got {name!r}")
            previous = existing.get(name) or staged.get(name)
            if previous is not None:
                raise DuplicateNameError(
                    f"{self.project}: {kind} name {name!r} is registered twice: by "
                    f"{previous.provider} {previous.version} and by {provider.name} {provider.version}"
                )
            staged[name] = Entry(kind, name, target, provider.name, provider.version, description)

        return register

    def reload(self) -> None:
        """Forget what was loaded, so the next look-up rediscovers plugins (tests, notebooks)."""
        with self._lock:
            self._entries = None
            self._failed = []

    # --- look-ups ------------------------------------------------------------------------------

    def entries(self, kind: str) -> dict[str, Entry]:
        """Every entry of ``kind`` by name."""
        loaded = self._load()
        if kind not in loaded:
            raise UnknownNameError(f"{self.project} has no plugin kind {kind!r}; kinds: {', '.join(sorted(loaded))}")
        return dict(loaded[kind])

    def names(self, kind: str) -> list[str]:
        return sorted(self.entries(kind))

    def entry(self, kind: str, name: str) -> Entry:
        entries = self.entries(kind)
        if name not in entries:
            available = ", ".join(sorted(entries)) or "(none)"
            raise UnknownNameError(f"unknown {_singular(kind)} {name!r}; available: {available}")
        return entries[name]

    def get(self, kind: str, name: str) -> Any:
        """The object registered as ``name`` for ``kind``; unknown names list the available ones."""
        return self.entry(kind, name).load()

    def failed(self) -> list[FailedPlugin]:
        self._load()
        return list(self._failed)

    def describe(self) -> list[dict[str, str]]:
        """One row per entry and per failed plugin, for ``vfm plugins``."""
        rows = [
            {
                "host": self.project,
                "kind": e.kind,
                "name": e.name,
                "provider": e.provider,
                "version": e.version,
                "status": "ok",
                "description": e.description,
            }
            for kind in self.kinds
            for e in sorted(self.entries(kind).values(), key=lambda e: e.name)
        ]
        rows += [
            {
                "host": f.host,
                "kind": "-",
                "name": f.name,
                "provider": f.provider,
                "version": f.version,
                "status": "failed",
                "description": f.error,
            }
            for f in self._failed
        ]
        return rows
