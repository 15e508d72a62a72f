"""A host's kinds and built-ins as data: the ``plugins.toml`` beside a package's ``plugins.py``.

Each top-level table of the file is one plugin kind::

    [families]
    hook = "Register model families. Target: a `vfm_models.families.ModelFamily`."

    [families.builtin]
    dit = { target = "vfm_models.families.dit.model:FAMILY", description = "class-conditional DiT" }

``hook`` becomes the docstring of the hookspec ``<project>_register_<kind>(register: Register)``
(:func:`declare_hookspecs`); ``builtin`` lists the package's own entries, which register through
that same hook, as a third-party plugin does (:meth:`Declaration.builtin_plugin`). A target is a
lazy ``"module:attr"`` string, imported only when the name is used. ``requires`` (optional) lists
the attributes every target of the kind must have: ``PluginHost.get`` checks them when it loads a
target, so a plugin that lacks one fails with an error naming it instead of an ``AttributeError``
deep inside the code that uses it.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from types import SimpleNamespace
from typing import Any, Callable

import pluggy

from vfm_plugins.errors import PluginError
from vfm_plugins.host import Register

#: The file name, inside the package whose host it declares.
DECLARATION_FILE = "plugins.toml"


@dataclass(frozen=True)
class BuiltinEntry:
    """One built-in name of a kind: its lazy ``"module:attr"`` target and a one-line description."""

    name: str
    target: str
    description: str = ""


@dataclass(frozen=True)
class Declaration:
    """What a ``plugins.toml`` declares: for each kind (in file order) its hook's docstring and its
    built-in entries."""

    project: str
    hooks: dict[str, str]
    builtins: dict[str, tuple[BuiltinEntry, ...]]
    source: str = DECLARATION_FILE
    #: kind -> the attributes each of its targets must have (``requires`` in the file)
    requires: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def hook_name(self, kind: str) -> str:
        return f"{self.project}_register_{kind}"

    @property
    def kinds(self) -> dict[str, str]:
        """Kind -> hook name, in the order the file declares them."""
        return {kind: self.hook_name(kind) for kind in self.hooks}

    def hookspecs(self) -> dict[str, Callable[..., None]]:
        """One pluggy hookspec function per kind, by hook name."""
        marker = pluggy.HookspecMarker(self.project)
        return {self.hook_name(kind): marker(_hook_function(self.project, self.hook_name(kind), doc))
                for kind, doc in self.hooks.items()}

    def builtin_plugin(self) -> SimpleNamespace:
        """A plugin object implementing, for each kind with built-ins, its hook: it calls
        ``register(name, target, description=...)`` once per entry, in file order."""
        marker = pluggy.HookimplMarker(self.project)
        impls = {self.hook_name(kind): marker(_register_function(self.hook_name(kind), entries))
                 for kind, entries in self.builtins.items() if entries}
        return SimpleNamespace(**impls)


def _hook_function(project: str, name: str, doc: str) -> Callable[..., None]:
    def hook(register: Register) -> None:
        pass

    hook.__name__ = hook.__qualname__ = name
    hook.__doc__ = doc
    hook.__module__ = f"{project}.hookspecs"
    return hook


def _register_function(name: str, entries: tuple[BuiltinEntry, ...]) -> Callable[..., None]:
    def register_builtins(register: Register) -> None:
        for entry in entries:
            register(entry.name, entry.target, description=entry.description)

    register_builtins.__name__ = register_builtins.__qualname__ = name
    return register_builtins


def parse_declaration(project: str, text: str, source: str = DECLARATION_FILE) -> Declaration:
    """A :class:`Declaration` from the text of a ``plugins.toml``; a malformed one is a
    :class:`PluginError` naming the file, the place and what is accepted."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PluginError(f"{source}: not valid TOML: {exc}") from None
    hooks: dict[str, str] = {}
    builtins: dict[str, tuple[BuiltinEntry, ...]] = {}
    requires: dict[str, tuple[str, ...]] = {}
    for kind, table in data.items():
        where = f"{source} [{kind}]"
        if not kind.isidentifier():
            raise PluginError(f"{where}: a kind name must be a Python identifier (it names the hook "
                              f"{project}_register_<kind>), e.g. text_encoders")
        if not isinstance(table, dict):
            raise PluginError(f"{where}: a kind is a table with `hook` (its docstring) and optionally `builtin`")
        _only(where, table, ("hook", "builtin", "requires"))
        doc = table.get("hook")
        if not isinstance(doc, str) or not doc.strip():
            raise PluginError(f"{where}: `hook` must be a non-empty string: the hook's docstring "
                              "(what a plugin of this kind registers and what its target is)")
        hooks[kind] = doc.strip()
        builtins[kind] = _entries(f"{source} [{kind}.builtin]", table.get("builtin", {}))
        required = table.get("requires", [])
        if not (isinstance(required, list) and all(isinstance(a, str) and a.isidentifier() for a in required)):
            raise PluginError(f"{where}: `requires` must be a list of attribute names, e.g. "
                              f"[\"name\", \"process\"]; got {required!r}")
        if required:
            requires[kind] = tuple(required)
    if not hooks:
        raise PluginError(f"{source}: declares no kind; each top-level table [<kind>] is one")
    return Declaration(project, hooks, builtins, source, requires)


def _entries(where: str, table: Any) -> tuple[BuiltinEntry, ...]:
    if not isinstance(table, dict):
        raise PluginError(f"{where}: must be a table of name = {{ target = \"module:attr\", description = \"...\" }}")
    entries = []
    for name, spec in table.items():
        if not isinstance(spec, dict):
            raise PluginError(f"{where} {name}: must be a table {{ target = \"module:attr\", description = \"...\" }}")
        _only(f"{where} {name}", spec, ("target", "description"))
        target, description = spec.get("target"), spec.get("description", "")
        module, _, attr = target.partition(":") if isinstance(target, str) else ("", "", "")
        if not (module and attr):
            raise PluginError(f"{where} {name}: target must be a \"module:attr\" string, got {target!r}")
        if not isinstance(description, str):
            raise PluginError(f"{where} {name}: description must be a string, got {description!r}")
        entries.append(BuiltinEntry(name, target, description))
    return tuple(entries)


def _only(where: str, table: dict, allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise PluginError(f"{where}: unknown key(s) {', '.join(unknown)}; accepted: {', '.join(allowed)}")


@functools.cache
def read_declaration(package: str) -> Declaration:
    """The :class:`Declaration` in ``<package>/plugins.toml`` (package data, so it is in the wheel);
    ``package`` is also the host's project name. Read once per process."""
    path = resources.files(package).joinpath(DECLARATION_FILE)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PluginError(f"{package}: no {DECLARATION_FILE} in the package (looked at {path})") from None
    return parse_declaration(package, text, source=f"{package}/{DECLARATION_FILE}")


def declare_hookspecs(package: str) -> dict[str, Any]:
    """The names a package's ``hookspecs.py`` defines, for ``globals().update(...)``: one
    hookspec ``<package>_register_<kind>(register: Register)`` per kind of its ``plugins.toml``,
    with the kind's ``hook`` text as docstring, and ``declaration`` (the :class:`Declaration`)."""
    declaration = read_declaration(package)
    return {"declaration": declaration, **declaration.hookspecs()}
