"""Text from data (file names, captions, plugin descriptions, a lock file's command) made safe to
print on a terminal: control characters and bidi overrides become visible ``\\x1b``-style escapes,
so a name cannot move the cursor, set a link or the clipboard (OSC 8/52), overwrite the line (CR)
or reorder what the user reads. Ordinary text comes back unchanged."""

from __future__ import annotations

import difflib
import unicodedata
from typing import Iterable

# bidi embeddings, overrides, isolates and marks: they reorder the text around them on screen
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_KEEP = frozenset("\n\t")  # layout, not control: multi-line messages stay multi-line


def _escape(ch: str) -> str:
    if ch == "\r":
        return "\\r"  # as repr() writes it
    n = ord(ch)
    return f"\\x{n:02x}" if n <= 0xFF else f"\\u{n:04x}" if n <= 0xFFFF else f"\\U{n:08x}"


def printable(text: object) -> str:
    """``str(text)`` with every control character (C0 but newline and tab, DEL, C1), bidi control
    and lone surrogate (a non-UTF-8 file name) written as its escape, e.g. ``\\x1b``, ``\\r``, ``\\u202e``."""
    s = str(text)
    if s.isprintable() and not _BIDI.intersection(s):  # the common case: nothing to do
        return s
    return "".join(
        _escape(ch) if ch not in _KEEP and (ch in _BIDI or unicodedata.category(ch) in ("Cc", "Cs")) else ch for ch in s
    )


def rich_text(text: object):
    """A :class:`rich.text.Text` of :func:`printable` ``text``: printed by rich as it reads, never
    read as markup (``[red]``, ``[link=...]`` in a file name stay text). Needs rich (the CLI's)."""
    from rich.text import Text

    return Text(printable(text))


def did_you_mean(word: str, accepted: Iterable[str], *, quote: bool = False) -> str:
    """`` (did you mean num_heads?)`` for a ``word`` close to one of ``accepted`` (``heads``), else ``""``:
    the one rule every unknown-key error follows (``quote``: the name as ``repr`` writes it)."""
    close = difflib.get_close_matches(word, list(accepted), n=1)
    if not close:
        return ""
    return f" (did you mean {close[0]!r}?)" if quote else f" (did you mean {close[0]}?)"


def exception_text(exc: BaseException) -> str:
    """What an exception says, for a one-line error: a ``KeyError``'s message without the quotes its
    ``str()`` adds (stripping quote characters from the ends would also eat a message's own closing quote)."""
    if isinstance(exc, KeyError) and len(exc.args) == 1 and isinstance(exc.args[0], str):
        return exc.args[0]
    return str(exc)


def counted(n: int, word: str, plural: str | None = None) -> str:
    """``1 frame``, ``2 frames``, ``0 frames``: a count and its noun in the number the count takes
    (``plural``: the word's plural where adding ``s`` is wrong)."""
    return f"{n} {word if n == 1 else plural or word + 's'}"


def repr_start(value: object, width: int = 60) -> str:
    """``value``'s repr on one line (a module's repr spans many), cut to ``width`` characters and ``...``:
    what a plugin's wrong return value looked like, for a one-line error."""
    text = " ".join(repr(value).split())
    return text[:width] + "..." if len(text) > width else text
