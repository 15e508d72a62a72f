"""Paths in an inference export stay inside it: an export is data, and a path it names is opened by
whatever the export builds (a tokenizer's TorchScript, a text encoder's checkpoint).

Every string of ``config.json`` that is a path (under a key such as ``path`` or ``weights``, or
holding a path separator) must resolve, symbolic links followed, inside the export folder or
inside a weights root the user names (``vfm generate --weights-root DIR``). Relative paths are
relative to the export folder. An export cannot opt itself in to TorchScript: an
``allow_torchscript`` it records is dropped, only the user's own argument counts. A folder the
export names holds no symbolic link leading out. :func:`check_data_paths` is the same rule for other
data folders (``vfm train`` checks the options a shard dataset records against the dataset folder).
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
CONFIG_FILE = "config.json"


class ExportPathError(ValueError):
    """A path in an export that points outside the export folder and every weights root."""


def _is_path_key(key: str) -> bool:
    return key in _PATH_KEYS or key.endswith(_PATH_SUFFIXES)


def _looks_like_path(value: str) -> bool:
    return "/" in value or os.sep in value or value.startswith("~") or value in (".", "..")


def check_export_paths(folder: str | PathLike, meta: Mapping[str, Any],
                       weights_roots: Iterable[str | PathLike] = ()) -> dict[str, Any]:
    """``meta`` with its option paths made absolute, after checking every path in it; raises
    :class:`ExportPathError` naming the key and the path of the first one outside the allowed folders."""
    return check_data_paths(
        folder, meta, weights_roots, file=CONFIG_FILE, inside="the export folder and every weights root",
        advice="copy it into the export, or name its folder with --weights-root DIR (weights_roots=[...] in Python) "
               "if you trust it")


def check_data_paths(folder: str | PathLike, meta: Mapping[str, Any], roots: Iterable[str | PathLike] = (), *,
                     file: str, inside: str, advice: str) -> dict[str, Any]:
    """The rule of :func:`check_export_paths` for any data folder (an export, a shard dataset whose
    samples record the options they were made with): every path in ``meta`` resolves, links followed,
    inside ``folder`` or one of ``roots`` (folders the user names). A path inside ``folder`` that is a
    folder holds no symbolic link leading out of ``folder`` and the roots (a model folder whose
    weights file links to another of the victim's files). ``file``, ``inside`` and ``advice`` word the
    error: ``{file} key {key} = {value} resolves to {path}, outside {inside} ({folders}); {advice}``.
    Returns ``meta`` with the paths of :data:`OPTION_SECTIONS` absolute and :data:`USER_ONLY_OPTIONS` dropped."""
    export = Path(folder).resolve()
    allowed = [export]
    for root in roots:
        if not Path(root).is_dir():
            raise ExportPathError(f"weights root {root} is not a folder")
        allowed.append(Path(root).resolve())

    def refuse(key: str, value: str, resolved: Path, what: str = "") -> ExportPathError:
        folders = ", ".join(str(r) for r in allowed)
        return ExportPathError(f"{file} key {key} = {value!r} {what}resolves to {resolved}, outside {inside} ({folders}); "
                               f"{advice}")

    def visit(value: Any, key: str, leaf: str, rewrite: bool) -> Any:
        if isinstance(value, Mapping):
            return {k: visit(v, f"{key}.{k}", str(k), rewrite) for k, v in value.items()
                    if not (rewrite and k in USER_ONLY_OPTIONS)}
        if isinstance(value, list):
            return [visit(v, f"{key}[{i}]", leaf, rewrite) for i, v in enumerate(value)]
        if isinstance(value, str) and value and (_is_path_key(leaf) or _looks_like_path(value)):
            path = Path(value).expanduser()
            resolved = (path if path.is_absolute() else export / path).resolve()
            if not any(resolved.is_relative_to(root) for root in allowed):
                raise refuse(key, value, resolved)
            if resolved.is_relative_to(export) and resolved.is_dir():
                link = _link_out(resolved, allowed)
                if link is not None:
                    raise refuse(key, value, link.resolve(), f"holds the symbolic link {link}, which ")
            return str(resolved) if rewrite else value
        return value

    return {k: visit(v, k, k, k in OPTION_SECTIONS) for k, v in meta.items()}


def _link_out(folder: Path, allowed: list[Path]) -> Path | None:
    """The first symbolic link under ``folder`` that resolves outside every allowed folder; a link to a
    folder inside is walked too (once: a loop of links ends), since a reader goes through it."""
    todo, seen = [folder], set()
    while todo:
        top = todo.pop()
        if top in seen:
            continue
        seen.add(top)
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            for name in sorted([*dirnames, *filenames]):
                entry = Path(dirpath) / name
                if not entry.is_symlink():
                    continue
                target = entry.resolve()
                if not any(target.is_relative_to(root) for root in allowed):
                    return entry
                if target.is_dir():
                    todo.append(target)
    return None
