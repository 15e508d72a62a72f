"""The folder ``vfm export -o`` writes: new, empty, or one an earlier export wrote, which is replaced
whole (``vfm_plugins.folders.written_whole``); never a folder with other files, which the export would
sit beside."""

from __future__ import annotations

from pathlib import Path

#: The files of each folder ``vfm export`` writes: a vfm export, a diffusers model folder.
EXPORT_FILES = (frozenset({"config.json", "model.safetensors"}),
                frozenset({"config.json", "diffusion_pytorch_model.safetensors"}))


def is_previous_export(folder: Path) -> bool:
    """``folder`` holds exactly the plain files of one kind of export (none of them a link)."""
    entries = list(folder.iterdir())
    if any(e.is_symlink() or not e.is_file() for e in entries):
        return False
    return frozenset(e.name for e in entries) in EXPORT_FILES


def out_folder_problem(out: Path) -> str | None:
    """Why ``out`` cannot take an export, or None: a folder with other files than an export's."""
    if not out.is_dir() or not any(out.iterdir()) or is_previous_export(out):
        return None
    names = sorted(e.name for e in out.iterdir())
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return (f"--out {out} is not empty and not an earlier export (it holds {shown}): the export would sit beside those "
            "files; name a new or empty folder, or one that vfm export wrote before (it is then replaced whole)")


def source_problem(out: Path, source: Path) -> str | None:
    """Why ``out`` cannot take the export of ``source`` (the export folder read), or None: it is that
    folder, which holds an export's files and so would pass as an earlier export to replace."""
    if not (out.exists() and out.samefile(source)):
        return None
    return (f"--out {out} is the export being read ({source}): writing it would replace the source whole; "
            "name another folder")
