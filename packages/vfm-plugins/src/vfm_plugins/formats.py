"""Format versions of the files vfm writes and another vfm version reads back (an export, a checkpoint's
manifest, a loader state): one check, so every format refuses a file it cannot read in the same words.

The rule every format follows (docs/contracts.md, "Persisted formats"): a format's version is a whole
number, bumped when a reader of the previous version would misread or fail on the new files. A file
without the field predates it and reads as the version the caller names. A newer version is refused
(upgrade vfm), an older one that is no longer read is refused (the caller says what re-makes it).
Keys added without a bump are ones an older reader may skip: it ignores them with one :class:`Notice`
(:func:`ignore_unknown_keys`), since refusing them would lock older vfms out of files they read correctly.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping
from importlib import metadata
from typing import Any

from vfm_plugins import json_data
from vfm_plugins.errors import Notice
from vfm_plugins.files import NotRegularFileError, read_regular


class FormatVersionError(ValueError):
    """A file in a format version this vfm does not read. One line: the file, its version (and the vfm that
    wrote it when the file says), the versions this vfm reads, and what to do."""


#: (file, its unknown keys) already named: a command may read a file more than once (vfm export, train's
#: model.init_from), and Python's own once-per-location filter sees each reader as another location.
_NAMED: set[tuple[str, tuple[str, ...]]] = set()


class UnknownKeysNotice(Notice):
    """A file of a version this vfm reads holds keys it does not know (written by a newer vfm, or edited by
    hand): they are ignored."""


def installed(package: str) -> str:
    """``package`` and its installed version ("vfm-curator 0.1.0"; the name alone where it is not
    installed): the ``written_by`` of a versioned file, and this vfm in a refusal."""
    try:
        return f"{package} {metadata.version(package)}"
    except metadata.PackageNotFoundError:
        return package


def _is_version(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _fit_for_one_line(text: Any) -> bool:
    # a file may hold anything where its writer is named: a newline or a page of text would break the one line
    return isinstance(text, str) and 0 < len(text) <= 64 and text.isprintable()


def check_format_version(found: Any, *, where: str, what: str, current: int, package: str, oldest: int = 1,
                         missing: int | None = None, writer: Any = "", older_fix: str = "",
                         error: type[FormatVersionError] = FormatVersionError) -> int:
    """The version ``found`` in file ``where`` (a ``what``: "vfm export", "checkpoint", ...) when this
    ``package`` reads it (``oldest``..``current``); else :class:`FormatVersionError`.

    ``found`` None (the file has no version field) reads as ``missing``, the version files had before
    the field was written; with ``missing`` None the field is required. ``writer`` (the vfm version the
    file names as its writer, when it names one, as read: checked here) goes into the message; ``older_fix`` is what to do
    with a file older than ``oldest``. ``error``: the package's own subclass of :class:`FormatVersionError`
    to raise (a checkpoint's is also one of its checkpoint errors).
    """
    if found is None and missing is not None:
        return missing
    if _is_version(found) and oldest <= found <= current:
        return found  # the common case returns before the message: shards check every sample
    reads = f"{oldest}" if oldest == current else f"{oldest} to {current}"
    # looked up only for the message: importlib.metadata scans the installed packages (~0.2 ms a call)
    this = f"this vfm ({installed(package)}) reads version {reads}"
    if found is None:
        raise error(f"{where} has no {what} format version; {this}: it is not a {what} that vfm wrote, "
                    "or it is damaged")
    if not _is_version(found):
        raise error(f"{where}: the {what} format version must be a whole number >= 1, got {found!r}; {this}")
    by = f" ({writer})" if _fit_for_one_line(writer) else ""
    if found > current:
        raise error(f"{where} is a {what} of format version {found}, written by a newer vfm{by}; {this}: "
                    f"upgrade it (pip install -U {package}) to read it")
    raise error(f"{where} is a {what} of format version {found}, written by an older vfm{by}; {this}: "
                f"{older_fix or 're-make it with this vfm'}")


def check_json_format(path: str | os.PathLike, *, what: str, current: int, package: str,
                      missing: int | None = None) -> int | None:
    """The format version of the JSON object file at ``path`` (its ``format_version``; its ``written_by``
    goes into a refusal), checked by :func:`check_format_version`; None when there is no file there.
    ``missing``: what an object without the field reads as (None: the field is required). A file that
    is no JSON object (damaged, cut short) is refused as one without a version. Reads only, so a
    command checks it before it takes any lock."""
    try:
        # read_regular: a named pipe there (a folder from elsewhere) is no file, never waited on
        data = json_data.loads(read_regular(path, follow_links=True).decode("utf-8"))
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, NotRegularFileError):
        return None
    except (OSError, ValueError):  # there but unreadable, or no JSON: refused below as one without a version
        data = None
    if not isinstance(data, dict):
        return check_format_version(None, where=str(path), what=what, current=current, package=package)
    return check_format_version(data.get("format_version"), where=str(path), what=what, current=current,
                                package=package, missing=missing, writer=data.get("written_by", ""))


def ignore_unknown_keys(data: Mapping[str, Any], known: Iterable[str], *, where: str, what: str,
                        stacklevel: int = 2) -> list[str]:
    """The keys of ``data`` not in ``known``, sorted; when there are any, one :class:`UnknownKeysNotice`
    naming them and ``where``, once per process for those keys of that file. The caller reads the rest as usual."""
    unknown = sorted(set(map(str, data)) - set(known))
    if unknown and (where, tuple(unknown)) not in _NAMED:
        _NAMED.add((where, tuple(unknown)))
        warnings.warn(f"{where}: ignoring {', '.join(map(repr, unknown))}, not part of the {what} format this vfm "
                      "reads (written by a newer vfm, or by hand)", UnknownKeysNotice, stacklevel=stacklevel + 1)
    return unknown
