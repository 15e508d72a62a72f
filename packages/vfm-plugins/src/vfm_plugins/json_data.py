"""JSON read from a file vfm did not write (an export's config, a checkpoint's manifest, a dataset's
``.info.json``, a run folder's records): Python's reader raises ``RecursionError``, not a
``ValueError``, on arrays or objects nested deeper than it follows (a 2 KB ``[[[[...]]]]``), so every
handler written for a file that does not parse let it through as a traceback. :func:`loads` raises a
:class:`NestedTooDeepError` (a ``json.JSONDecodeError``) there instead, at the bracket that opens the deepest level."""

from __future__ import annotations

import json
from typing import Any


class NestedTooDeepError(json.JSONDecodeError):
    """JSON whose arrays and objects nest deeper than Python's reader follows (still a ``json.JSONDecodeError``,
    so a ``ValueError``, for handlers of text that does not parse)."""


def loads(text: str | bytes, **kwargs: Any) -> Any:
    """``json.loads(text, **kwargs)``; nesting too deep to read is a :class:`NestedTooDeepError`."""
    try:
        return json.loads(text, **kwargs)
    except RecursionError:
        doc = text.decode("utf-8", "replace") if isinstance(text, (bytes, bytearray)) else text
        depth, pos = _deepest(doc)
        raise NestedTooDeepError(f"arrays and objects nested {depth} levels deep, deeper than Python's JSON reader "
                                   "follows (accepted: JSON nested a few levels, as vfm writes it)", doc, pos) from None


def _deepest(doc: str) -> tuple[int, int]:
    """(the deepest nesting of arrays and objects in ``doc``, where it is first reached); brackets in strings do not count."""
    depth = deepest = at = 0
    in_string = escaped = False
    for i, ch in enumerate(doc):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest, at = depth, i
        elif ch in "]}":
            depth -= 1
    return deepest, at
