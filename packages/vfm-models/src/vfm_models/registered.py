"""How an error names an object built from a registered name: ``tokenizer 'my-tok' (from my-plugin 0.2.0,
class my_plugin.MyTok)``, so a plugin author sees which of their classes broke a contract."""

from __future__ import annotations

from typing import Any


def registered_as(kind: str, singular: str, obj: Any) -> str:
    """``{singular} 'name' (from dist version, class module.Class)`` where a registered name of ``kind``
    targets ``obj``'s class, else ``{singular} module.Class``."""
    import vfm_models

    cls = type(obj)
    path = f"{cls.__module__}.{cls.__qualname__}"
    for name, entry in vfm_models.host.entries(kind).items():
        if entry.target is cls or entry.target == f"{cls.__module__}:{cls.__qualname__}":
            return f"{singular} {name!r} (from {entry.provider} {entry.version}, class {path})"
    return f"{singular} {path}"
