"""Options of the built-in tokenizers, text encoders and formulations checked by name when the class is
called directly (``get_formulation("edm")(sigmadata=1)``), as :meth:`vfm_plugins.PluginHost.build` checks
them for every registered name: the option, the component and the options it accepts, not Python's
``__init__() got an unexpected keyword argument``."""

from __future__ import annotations

import functools
import inspect
from typing import Callable, TypeVar

from vfm_plugins import PluginOptionError

C = TypeVar("C", bound=type)


def named_options(kind: str) -> Callable[[C], C]:
    """Class decorator: an unknown keyword option of the class's ``__init__`` is a
    :class:`~vfm_plugins.PluginOptionError` (a TypeError) naming it, ``kind`` and the class, and the
    accepted options. The signature stays readable (``functools.wraps``), so ``PluginHost.build`` and
    ``inspect.signature`` see the real options; an ``__init__`` taking ``**kwargs`` is left as it is."""

    def decorate(cls: C) -> C:
        init = cls.__init__
        params = list(inspect.signature(init).parameters.values())[1:]  # without self
        if any(p.kind is p.VAR_KEYWORD for p in params):
            return cls
        accepted = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]

        @functools.wraps(init)
        def __init__(self, *args, **kwargs):
            unknown = sorted(set(kwargs) - set(accepted))
            if unknown:
                raise PluginOptionError(f"{kind} {type(self).__name__} has no option {', '.join(unknown)}; "
                                        f"accepted: {', '.join(_own_options(type(self), cls, accepted) + accepted) or '(none)'}")
            init(self, *args, **kwargs)

        cls.__init__ = __init__
        return cls

    return decorate


def _own_options(made: type, decorated: type, accepted: list[str]) -> list[str]:
    """The named options a subclass's own ``__init__`` adds before forwarding the rest (``**kwargs``) to the
    decorated class: a typo reaches the decorated class's check, whose list alone would leave them out."""
    own: list[str] = []
    for klass in made.__mro__[:made.__mro__.index(decorated)]:
        if "__init__" in vars(klass):
            params = list(inspect.signature(vars(klass)["__init__"]).parameters.values())[1:]
            named = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
            own += [name for name in named if name not in own + accepted]
    return own
