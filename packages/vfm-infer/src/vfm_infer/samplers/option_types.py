"""The type a sampler option takes, read from the sampler's constructor annotations, so a value of the
wrong type (``churn="abc"``, ``churn=True``, ``steps_offset=1.5``) is named with what is accepted before the
constructor compares or computes with it (a bare ``TypeError``, or a bool silently read as 0 or 1)."""

from __future__ import annotations

import inspect
import numbers
import types
import typing
from typing import Any, Mapping

_NoneType = type(None)


def _accepts(hint: Any, value: Any) -> bool | None:
    """Whether ``value`` fits ``hint``; None for a hint this does not read (the constructor then decides)."""
    if hint is Any:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        answers = [_accepts(arm, value) for arm in typing.get_args(hint)]
        return True if any(answers) else (None if None in answers else False)
    if origin is typing.Literal:
        return any(value == choice and type(value) is type(choice) for choice in typing.get_args(hint))
    if hint is _NoneType:
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    # bool is an int to Python, but churn=true meaning churn 1 is a typo, not a request
    if hint is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if hint is float:  # an integer is a number too (churn=40); numpy scalars count
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    return None


def _describe(hint: Any) -> str:
    """What ``hint`` accepts, in words (``a number``, ``one of 'leading', 'trailing'``)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):  # None stands for the default: not something to type
        arms = [arm for arm in typing.get_args(hint) if arm is not _NoneType]
        return " or ".join(_describe(arm) for arm in arms)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(choice) for choice in typing.get_args(hint))
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false",
            _NoneType: "none"}.get(hint, getattr(hint, "__name__", str(hint)))


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, numbers.Integral):
        return "an integer"
    if isinstance(value, numbers.Real):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return f"a {type(value).__name__}"


def _hints(cls: type) -> Mapping[str, Any]:
    """The constructor's annotations, each resolved on its own where not all resolve together (a plugin's
    name imported only under TYPE_CHECKING loses the check of that option alone)."""
    init = cls.__init__
    try:
        return typing.get_type_hints(init)
    except Exception:  # noqa: BLE001 - an unresolvable annotation only loses its own check
        pass
    hints = {}
    for key, annotation in getattr(init, "__annotations__", {}).items():
        try:
            hints[key] = eval(annotation, getattr(init, "__globals__", {})) if isinstance(annotation, str) else annotation
        except Exception:  # noqa: BLE001 - the constructor still judges this option
            continue
    return hints


def option_type_problems(cls: type, options: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> list[str]:
    """One line per option in ``options`` whose value does not fit the type ``cls.__init__`` annotates it
    with, naming the option, the value given, what it takes and its default (the one in ``defaults``, an
    export's schedule, where it has one: that is what runs without the option); options without a
    readable annotation are left to the constructor."""
    hints = _hints(cls)
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        params = {}
    problems = []
    for key, value in options.items():
        if key not in hints or _accepts(hints[key], value) is not False:
            continue
        default = params[key].default if key in params else inspect.Parameter.empty
        shown = "" if default is inspect.Parameter.empty or default is None else f" (default {default!r})"
        if defaults and key in defaults and defaults[key] != default:
            own = "" if default is inspect.Parameter.empty or default is None else f"; the sampler's own {default!r}"
            shown = f" (default here {defaults[key]!r}, the export's{own})"
        problems.append(f"{key} takes {_describe(hints[key])}{shown}, got {value!r} ({_kind(value)})")
    return problems
