"""Whether a plugin's method can take the arguments vfm will call it with, read once at load: a wrong
signature otherwise fails at the first call, deep in a run, as Python's ``takes 2 positional arguments
but 3 were given``, often blamed on the data rather than the plugin."""

from __future__ import annotations

import inspect
from typing import Any, Callable


def refused_signature(function: Callable[..., Any], positional: int, *, partial: bool = False) -> inspect.Signature | None:
    """``function``'s signature where it cannot be called with ``positional`` positional arguments (with
    ``partial``, where it cannot take them even with keyword-only options added), else ``None``; ``None``
    too for a builtin or C callable whose signature cannot be read (the call decides)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    bind = signature.bind_partial if partial else signature.bind
    try:
        bind(*([None] * positional))
    except TypeError:
        return signature
    return None
