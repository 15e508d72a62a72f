"""The plugin host: one pluggy host per vfm package, with a registry of named specs per kind.

Built-in plugins and third-party entry points register through the same ``register`` callback;
every host shares this code and the errors of :mod:`vfm_plugins.errors`.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata as metadata
import inspect
import os
import re
import threading
import warnings
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Protocol

import pluggy

from vfm_plugins.errors import (DuplicateNameError, PluginError, PluginLoadError, PluginOptionError, PluginWarning,
                                UnknownNameError)

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
        """The registered object; a ``"module:attr"`` string target is imported on first use.

        A target that cannot be imported is a :class:`PluginLoadError` (an ``ImportError``) naming
        the entry, its provider and the target, chained to the original error."""
        if isinstance(self.target, str) and ":" in self.target:
            module_name, _, attr = self.target.partition(":")
            where = f"{_singular(self.kind)} {self.name!r} (from {self.provider} {self.version})"
            try:
                obj: Any = importlib.import_module(module_name)
            except Exception as exc:
                raise PluginLoadError(f"{where} cannot be loaded: importing {module_name} (its target "
                                      f"{self.target!r}) failed: {type(exc).__name__}: {exc}") from exc
            for part in attr.split("."):
                try:
                    obj = getattr(obj, part)
                except AttributeError:
                    raise PluginLoadError(f"{where} cannot be loaded: {type(obj).__name__} {getattr(obj, '__name__', obj)!s} "
                                          f"has no attribute {part!r} (its target is {self.target!r})") from None
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

    def row(self) -> dict[str, str]:
        """Its row of ``vfm plugins`` (:meth:`PluginHost.describe`): kind "-", status "failed"."""
        return {"host": self.host, "kind": "-", "name": self.name, "provider": self.provider,
                "version": self.version, "status": "failed", "description": self.error}


@dataclass
class _Provider:
    name: str
    version: str
    plugin: str = ""  # the entry point (``dist:name``) of a third-party plugin; "" for built-ins


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


def _describe(target: Any) -> str:
    if isinstance(target, str):
        return repr(target)
    return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', type(target).__name__)}"


def _abstract_methods(cls: type) -> str:
    """``_run (abstract in vfm_infer.samplers.base.Sampler)``, for each method ``cls`` leaves abstract."""
    def declared_by(method: str) -> str:
        for base in cls.__mro__[1:]:
            if getattr(base.__dict__.get(method), "__isabstractmethod__", False):
                return f"{base.__module__}.{base.__qualname__}"
        return cls.__qualname__

    return ", ".join(f"{m} (abstract in {declared_by(m)})" for m in sorted(cls.__abstractmethods__))


def _register_signature(name: str, target: Any, *, description: str = "") -> None: ...


#: What a registered name may hold: it is written in TOML keys ([options.NAME]), lists and
#: ``--option NAME.KEY=VALUE``, where a dot, a space or a colon would split it.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_+-]*")


_REGISTER_SIGNATURE = inspect.signature(_register_signature)


def _returned_text(value: Any) -> str:
    """A hook's return value for a message: its type, and its first characters."""
    from vfm_plugins.text import repr_start

    return f"a {type(value).__name__} ({repr_start(value)})"


def _call_text(args: tuple, kwargs: dict) -> str:
    return ", ".join([*(repr(a) for a in args), *(f"{k}={v!r}" for k, v in kwargs.items())])


def misplaced_entry_points(hosts: Iterable[str]) -> list[FailedPlugin]:
    """Entry points in a group that looks like a vfm host's but is none (``vfm_model``,
    ``vfm-models``, ``vfm_samplers``): no host ever loads them, so a plugin declared there would be
    silently absent. One :class:`FailedPlugin` each, naming the closest host group."""
    hosts = sorted(hosts)
    normal = {h.replace("-", "_").lower(): h for h in hosts}
    found = []
    every = metadata.entry_points()  # one scan of the installed distributions, not one per group
    for group in sorted(every.groups):
        if group in hosts:
            continue
        key = group.replace("-", "_").replace(".", "_").lower()
        close = normal.get(key) or next(iter(difflib.get_close_matches(key, list(normal), n=1, cutoff=0.8)), None)
        if close is None and not key.startswith("vfm_"):
            continue
        for ep in every.select(group=group):
            dist = ep.dist.name if ep.dist is not None else "unknown"
            version = ep.dist.version if ep.dist is not None else "unknown"
            hint = f"did you mean {normal.get(close, close)}? " if close else ""
            found.append(FailedPlugin(
                group, f"{dist}:{ep.name}", dist, version,
                f"entry point in group {group!r}, which is not a vfm plugin host, so nothing loads it; "
                f"{hint}the host groups: {', '.join(hosts)}"))
    return found


def unknown_options(factory: Any, options: Iterable[str]) -> tuple[list[str], list[str]]:
    """(the option names ``factory`` does not take, sorted; the names it takes): nothing is unknown to a
    factory taking ``**kwargs``, or to a builtin or C factory whose signature cannot be read (it reports
    its own errors)."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return [], []
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return [], []
    accepted = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return sorted(set(options) - set(accepted)), accepted


def missing_options(factory: Any, options: Iterable[str]) -> list[str]:
    """The options ``factory`` requires (named parameters without a default) that ``options`` lacks, in
    its signature's order; none for a factory whose signature cannot be read."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return []
    given = set(options)
    return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and p.default is p.empty and p.name not in given]


def option_defaults(factory: Any) -> dict[str, Any]:
    """The default of each option ``factory`` gives one (what an option left out is); none for a factory
    whose signature cannot be read (then only the options written out are known)."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in params if p.default is not p.empty}


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
                except Exception as exc:  # a broken plugin must not break the tool
                    self._fail(plugin_name, dist, version,
                               f"failed to import {ep.value!r}: {type(exc).__name__}: {exc}")
                    continue
                problem = self._check_hookimpls(pm, plugin, ep.value)
                if problem is None:
                    try:
                        pm.register(plugin, name=plugin_name)
                    except Exception as exc:  # pluggy's own validation (a historic or wrapper hook)
                        problem = str(exc).splitlines()[0] if str(exc) else repr(exc)
                if problem is not None:
                    if pm.has_plugin(plugin_name):
                        pm.unregister(name=plugin_name)
                    self._fail(plugin_name, dist, version, problem)
                    continue
                providers[plugin_name] = _Provider(dist, version, plugin_name)
        return pm, providers

    def _check_hookimpls(self, pm: pluggy.PluginManager, plugin: Any, value: str = "") -> str | None:
        """What is wrong with how ``plugin`` (the entry point's ``value``) implements this host's hooks,
        in one line, or None.

        pluggy silently ignores a hook name it does not know, a function without this host's
        ``@hookimpl`` marker and a module with no hooks at all, and reports a wrong signature in
        several lines; a plugin author gets one line naming the function and what is expected instead."""
        prefix = f"{self.project}_"
        hooks = sorted(self.kinds.values())
        marker = f"from {self.project}.plugins import hookimpl"
        def marked(attr: str) -> bool:  # carries this host's @hookimpl: meant as one of its hooks
            return pm.parse_hookimpl_opts(plugin, attr) is not None

        def meant_as_hook(attr: str) -> bool:  # checked one by one below; a misspelt one is named there
            return attr in hooks or attr.startswith(f"{prefix}register_") or marked(attr)

        if not any(meant_as_hook(attr) for attr in dir(plugin)):
            return self._no_hooks(plugin, value, hooks)
        for attr in sorted(dir(plugin)):
            if not attr.startswith(prefix) and not marked(attr):
                continue
            function = getattr(plugin, attr, None)
            if not callable(function):
                continue
            if pm.parse_hookimpl_opts(plugin, attr) is None:
                if attr not in hooks and not attr.startswith(f"{prefix}register_"):
                    continue  # a helper that merely shares the prefix
                other = [name.removesuffix("_impl") for name in vars(function)
                         if name.endswith("_impl") and name != f"{self.project}_impl"] \
                    if hasattr(function, "__dict__") else []
                why = f"is marked with the {other[0]} hookimpl, not {self.project}'s" if other else \
                    "has no @hookimpl marker, so it would never be called"
                return f"{attr} {why}; decorate it with the {self.project} marker ({marker})"
            if attr not in hooks:
                close = difflib.get_close_matches(attr, hooks, n=1)
                hint = f"did you mean {close[0]}? " if close else ""
                return f"{attr} is not a hook of {self.project}; {hint}its hooks: {', '.join(hooks)}"
            try:
                params = inspect.signature(function).parameters.values()
            except (TypeError, ValueError):
                continue
            # the host calls impl(register=callback): it must take that keyword and need nothing else
            takes = any(p.name == "register" and p.kind is not p.POSITIONAL_ONLY for p in params) \
                or any(p.kind is p.VAR_KEYWORD for p in params)
            needs = [p.name for p in params if p.default is p.empty and p.name != "register"
                     and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            if not takes or needs:
                shown = ", ".join(str(p) for p in params)
                return (f"{attr}({shown}) has the wrong signature; expected {attr}(register): "
                        "one argument named register, the callback register(name, target, *, description='')")
        return None

    def _no_hooks(self, plugin: Any, value: str, hooks: list[str]) -> str:
        """The entry point names a module holding none of this host's hooks (the package's
        ``__init__``, or the module of another host's hooks): pluggy would register it and it would
        add nothing, without a word. Names the other hosts' hooks it does hold, and where they go."""
        where = value or getattr(plugin, "__name__", repr(plugin))
        others = {}  # hook function name -> the host whose @hookimpl marks it
        for attr in sorted(dir(plugin)):
            function = getattr(plugin, attr, None)
            marks = [key.removesuffix("_impl") for key in getattr(function, "__dict__", {})
                     if key.endswith("_impl") and key.startswith("vfm_")]
            if callable(function) and marks:
                others[attr] = marks[0]
        hint = ""
        if others:
            held = ", ".join(f"{attr} (a {host} hook)" for attr, host in others.items())
            groups = ", ".join(f"[project.entry-points.{host}]" for host in dict.fromkeys(others.values()))
            hint = f"; it holds {held}: declare it under {groups} instead"
        return (f"{where} implements none of {self.project}'s hooks ({', '.join(hooks)}), so it would add "
                f"nothing; the entry point in group {self.project} must name the module holding them{hint}")

    def _entry_points(self) -> Iterable[metadata.EntryPoint]:
        seen: set[tuple[str, str]] = set()
        for ep in metadata.entry_points(group=self.project):
            key = (ep.name, ep.value)
            if key not in seen:  # editable installs can expose the same distribution twice
                seen.add(key)
                yield ep

    def _fail(self, plugin_name: str, dist: str, version: str, error: str, skipped: str = "is skipped") -> None:
        self._failed.append(FailedPlugin(self.project, plugin_name, dist, version, error))
        warnings.warn(f"{self.project}: plugin {plugin_name!r} ({dist} {version}) {skipped}: {error}",
                      PluginWarning, stacklevel=3)

    def _load(self) -> dict[str, dict[str, Entry]]:
        with self._lock:
            if self._entries is not None:
                return self._entries
            self._failed = []
            pm, providers = self.plugin_manager()
            entries: dict[str, dict[str, Entry]] = {kind: {} for kind in self.kinds}
            for kind, hook_name in self.kinds.items():
                hook = getattr(pm.hook, hook_name)
                # In registration order: the built-ins first, so a clash names them first.
                for impl in hook.get_hookimpls():
                    provider = providers[impl.plugin_name]
                    staged: dict[str, Entry] = {}
                    register = self._register_callback(kind, provider, entries[kind], staged)
                    try:
                        returned = impl.function(register=register)
                    except DuplicateNameError:
                        raise
                    except Exception as exc:
                        # only this hook's names are dropped: the plugin's other hooks registered theirs
                        self._fail(impl.plugin_name, provider.name, provider.version,
                                   f"raised in {hook_name}: {type(exc).__name__}: {exc}",
                                   f"adds no {kind.replace('_', ' ')} (its other hooks' names are kept)")
                        continue
                    if returned is not None and not staged:
                        # pluggy collects return values, but this host reads only register calls: a hook
                        # returning its names (a list, a dict) would add nothing without a word
                        self._fail(impl.plugin_name, provider.name, provider.version,
                                   f"{hook_name} returned {_returned_text(returned)} without calling "
                                   f"register; the host ignores what a hook returns: call register(name, target, *, "
                                   f"description='') once per {_singular(kind)} it adds, and return nothing",
                                   f"adds no {kind.replace('_', ' ')}")
                        continue
                    entries[kind].update(staged)
            self._entries = entries
            return entries

    def _register_callback(
        self, kind: str, provider: _Provider, existing: dict[str, Entry], staged: dict[str, Entry]
    ) -> Register:
        usage = "register(name, target, *, description='')"

        def register(*args: Any, **kwargs: Any) -> None:
            try:
                bound = _REGISTER_SIGNATURE.bind(*args, **kwargs)
            except TypeError as exc:
                raise PluginError(f"{usage}: {exc}; got register({_call_text(args, kwargs)})") from None
            name, target = bound.arguments["name"], bound.arguments["target"]
            description = bound.arguments.get("description", "")
            if not isinstance(name, str) or not name:
                raise PluginError(f"{self.project}: a {_singular(kind)} name must be a non-empty string, got {name!r}")
            if not NAME_PATTERN.fullmatch(name):
                raise PluginError(f"{_singular(kind)} name {name!r}: a name is letters, digits, '-', '_' and '+' (not first), "
                                  "as configs and options write it ([options.NAME], --option NAME.KEY=VALUE)")
            if not isinstance(description, str):
                raise PluginError(f"{usage}: description must be a string, got {description!r}")
            if isinstance(target, str):
                module_name, _, attr = target.partition(":")
                if not (module_name and attr):
                    raise PluginError(f"{_singular(kind)} {name!r}: a string target must be \"module:attr\" "
                                      f"(imported when the name is used), got {target!r}")
            previous = existing.get(name) or staged.get(name)
            if previous is not None:
                by = f"{provider.name} {provider.version}"
                if provider.plugin:
                    by += f" (plugin {provider.plugin})"
                raise DuplicateNameError(
                    f"{self.project}: {kind} name {name!r} is registered twice: by "
                    f"{previous.provider} {previous.version} and by {by}; one of them must use another name "
                    f"(or uninstall one, or set {DISABLE_ENV}={self.project} to load built-ins only)"
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

    def registered_as(self, kind: str, obj: Any) -> str:
        """How an error names ``obj``, built from a registered name of ``kind``: ``tokenizer 'my-tok' (from
        my-plugin 0.2.0, class my_plugin.MyTok)`` where a name of ``kind`` targets its class (eager or lazy),
        else ``tokenizer my_plugin.MyTok``; so a plugin author sees which of their classes broke a contract."""
        cls = type(obj)
        path = f"{cls.__module__}.{cls.__qualname__}"
        for name, entry in self.entries(kind).items():
            if entry.target is cls or entry.target == f"{cls.__module__}:{cls.__qualname__}":
                return f"{_singular(kind)} {name!r} (from {entry.provider} {entry.version}, class {path})"
        return f"{_singular(kind)} {path}"

    def entry(self, kind: str, name: str) -> Entry:
        entries = self.entries(kind)
        if name not in entries:
            available = ", ".join(sorted(entries)) or "(none)"
            # the name may be a failed plugin's: say so here too (its warning may be far above, or filtered)
            failed = "".join(f"; plugin {f.name!r} ({f.provider} {f.version}) failed to load: {f.error}"
                             for f in self._failed)
            raise UnknownNameError(f"unknown {_singular(kind)} {name!r}; available: {available}{failed}")
        return entries[name]

    def get(self, kind: str, name: str) -> Any:
        """The object registered as ``name`` for ``kind``; unknown names list the available ones.

        A target that cannot be imported, that lacks an attribute its kind ``requires`` (the
        host's ``plugins.toml``), or whose required ``name`` is not the name it is registered as, is a
        :class:`PluginLoadError` naming the entry and its provider."""
        entry = self.entry(kind, name)
        obj = entry.load()
        if inspect.isclass(obj) and inspect.isabstract(obj):  # else "Can't instantiate abstract class" when built
            raise PluginLoadError(
                f"{_singular(kind)} {name!r} (from {entry.provider} {entry.version}, target {_describe(entry.target)}) "
                f"is an abstract class: define {_abstract_methods(obj)} in {obj.__name__}")
        required = self.declaration.requires.get(kind, ()) if self.declaration is not None else ()
        missing = [attr for attr in required if not hasattr(obj, attr)]
        if missing:
            what = _singular(kind)
            raise PluginLoadError(
                f"{what} {name!r} (from {entry.provider} {entry.version}, target {_describe(entry.target)}) "
                f"lacks {', '.join(missing)}; a {what} must have: {', '.join(required)} "
                f"(the {self.kinds[kind]} hook's docstring says what each is)")
        if "name" in required and obj.name != name:  # logs, progress and option tables show obj.name
            raise PluginLoadError(
                f"{_singular(kind)} {name!r} (from {entry.provider} {entry.version}, target {_describe(entry.target)}) "
                f"has name = {obj.name!r}; it must be the name it is registered as: set name = {name!r}")
        return obj

    def build(self, kind: str, name: str, options: Mapping[str, Any] | None = None) -> Any:
        """``get(kind, name)(**options)``, for the kinds whose target is a class or factory built with
        the user's options (tokenizers, blenders, embedders, captioners, scorers, metrics, ...).

        An option the target does not take is a :class:`PluginOptionError` (a ``TypeError``) naming
        the name, its provider and the options it accepts, before the target is called (a target
        taking ``**kwargs`` accepts any): not ``__init__() got an unexpected keyword argument``; so is
        a required option (a parameter without a default) left out, naming it."""
        options = dict(options or {})
        factory = self.get(kind, name)
        if not callable(factory):  # e.g. register("x", MyMetric()) instead of register("x", MyMetric)
            entry = self.entry(kind, name)
            raise PluginLoadError(
                f"{_singular(kind)} {name!r} (from {entry.provider} {entry.version}) is registered as an "
                f"instance of {type(factory).__name__}, but a {_singular(kind)} is built with the user's options: "
                f"register its class (or a factory)")
        unknown, accepted = unknown_options(factory, options)
        if unknown:
            entry = self.entry(kind, name)
            raise PluginOptionError(
                f"{_singular(kind)} {name!r} (from {entry.provider} {entry.version}) has no option "
                f"{', '.join(unknown)}; accepted: {', '.join(accepted) or '(none)'}")
        missing = missing_options(factory, options)
        if missing:  # else Python's "__init__() missing 1 required positional argument", naming no plugin
            entry = self.entry(kind, name)
            raise PluginOptionError(
                f"{_singular(kind)} {name!r} (from {entry.provider} {entry.version}) needs the option"
                f"{'s' * (len(missing) > 1)} {', '.join(missing)}, not given")
        return factory(**options)

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
        return rows + [f.row() for f in self._failed]
