"""Paths in an inference export stay inside it: an export is data, and a path it names is opened by
whatever the export builds (a tokenizer's TorchScript, a text encoder's checkpoint).

Every string of ``config.json`` that is a path (under a key such as ``path`` or ``weights``, or
holding a path separator) must resolve, symbolic links followed, inside the export folder or
inside a weights root the user names (``vfm generate --weights-root DIR``). Relative paths are
relative to the export folder. An export cannot opt itself in to TorchScript: an
``allow_torchscript`` it records is dropped, only the user's own argument counts.
"""

from __future__ import annotations

import os
from os import PathLike
from pathlib import Path
from typing import Any, Iterable, Mapping

#: The parts of config.json passed to constructors (which may open files): their paths are rewritten
#: to the checked absolute paths, so a constructor never resolves a relative path against the cwd.
OPTION_SECTIONS = ("tokenizer_options", "text_encoder_options")
_PATH_KEYS = {"path", "weights", "checkpoint", "file", "folder", "dir", "root"}
_PATH_SUFFIXES = ("_path", "_dir", "_file", "_folder", "_weights", "_checkpoint", "_root")
#: An option only the user may set (the export's own value is dropped).
USER_ONLY_OPTIONS = ("allow_torchscript",)


class ExportPathError(ValueError):
    """A path in an export that points outside the export folder and every weights root."""


def _is_path_key(key: str) -> bool:
    return key in _PATH_KEYS or key.endswith(_PATH_SUFFIXES)


def _looks_like_path(value: str) -> bool:
    return "/" in value or os.sep in value or value.startswith("~")


def check_export_paths(folder: str | PathLike, meta: Mapping[str, Any],
                       weights_roots: Iterable[str | PathLike] = ()) -> dict[str, Any]:
    """``meta`` with its option paths made absolute, after checking every path in it; raises
    :class:`ExportPathError` naming the key and the path of the first one outside the allowed folders."""
    export = Path(folder).resolve()
    roots = [export]
    for root in weights_roots:
        if not Path(root).is_dir():
            raise ExportPathError(f"weights root {root} is not a folder")
        roots.append(Path(root).resolve())

    def visit(value: Any, key: str, leaf: str, rewrite: bool) -> Any:
        if isinstance(value, Mapping):
            return {k: visit(v, f"{key}.{k}", str(k), rewrite) for k, v in value.items()
                    if not (rewrite and k in USER_ONLY_OPTIONS)}
        if isinstance(value, list):
            return [visit(v, f"{key}[{i}]", leaf, rewrite) for i, v in enumerate(value)]
        if isinstance(value, str) and value and (_is_path_key(leaf) or _looks_like_path(value)):
            resolved = _inside(export, roots, value, key)
            return str(resolved) if rewrite else value
        return value

    return {k: visit(v, k, k, k in OPTION_SECTIONS) for k, v in meta.items()}


def _inside(export: Path, roots: list[Path], value: str, key: str) -> Path:
    path = Path(value).expanduser()
    resolved = (path if path.is_absolute() else export / path).resolve()
    if any(resolved.is_relative_to(root) for root in roots):
        return resolved
    allowed = ", ".join(str(r) for r in roots)
    raise ExportPathError(
        f"config.json key {key} = {value!r} resolves to {resolved}, outside the export folder and every "
        f"weights root ({allowed}); copy it into the export, or name its folder with --weights-root DIR "
        f"(weights_roots=[...] in Python) if you trust it"
    )
