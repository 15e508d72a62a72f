"""Turning ``INPUT...`` (files, directories, globs, jsonl/csv manifests) into a list of sources."""

from __future__ import annotations

import csv
import errno
import glob
import json
import os
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path

from vfm_plugins.text import counted

VIDEO_EXTENSIONS = {
    ".mp4", ".mov", ".mkv", ".avi", ".webm", ".m4v", ".mpg", ".mpeg", ".ts", ".mts", ".flv", ".wmv", ".3gp", ".ogv",
    # camcorders and broadcast (AVCHD .m2ts, MXF, DV, DVD .vob, JVC .mod/.tod), older web and Windows
    # formats, and raw elementary streams (FFmpeg finds the codec from the bytes)
    ".m2ts", ".m2t", ".mxf", ".dv", ".vob", ".mod", ".tod", ".3g2", ".f4v", ".asf", ".divx", ".rm", ".rmvb",
    ".mk3d", ".nut", ".y4m", ".ivf", ".m2v", ".h264", ".264", ".h265", ".265", ".hevc", ".obu",
    # QuickTime's old name, MPEG-1/2 program streams and elementary video (DVD-VR .vro), OGM, motion JPEG.
    # Not GoPro's .lrv: a low-resolution copy of the .mp4 beside it (it would be clipped twice)
    ".qt", ".mpe", ".m1v", ".mpv", ".m2p", ".vro", ".ogm", ".mjpeg", ".mjpg",
}
MANIFEST_EXTENSIONS = {".jsonl", ".csv"}


@dataclass(frozen=True)
class Source:
    path: str  # resolved absolute path (it may not exist: the run records that as a failure)
    caption: str | None = None


@dataclass
class LeftOut:
    """What folder inputs held that a walk did not take, so that a run names it instead of a silent
    skip (a user whose camera writes another extension, or whose folder the run may not list, learns it)."""

    not_read: dict[str, str] = field(default_factory=dict)  # folder -> why it could not be listed
    not_video: dict[str, int] = field(default_factory=dict)  # extension, lower case ("" for none) -> files
    hidden: int = 0  # dot-files and dot-folders (a dot-folder counts once, its contents unread)

    def line(self) -> str | None:
        """``N files not named like a video (.txt 2, .json 1) and M hidden ...``, or None when nothing was left out."""
        parts = []
        n = sum(self.not_video.values())
        if n:
            exts = sorted(self.not_video.items(), key=lambda kv: (-kv[1], kv[0]))
            shown = ", ".join(f"{ext or '(no extension)'} {count}" for ext, count in exts[:8])
            more = f", {len(exts) - 8} other extensions" if len(exts) > 8 else ""
            parts.append(f"{counted(n, 'file')} not named like a video ({shown}{more})")
        if self.hidden:
            parts.append(f"{self.hidden} hidden file{'s' if self.hidden != 1 else ''} or folder{'s' if self.hidden != 1 else ''} "
                         "(names starting with '.')")
        if not parts:
            return None
        return " and ".join(parts) + "; name such a file as an input (or in a .jsonl/.csv manifest) to read it"


def expand(inputs: list[str], exclude: str | Path | None = None, left_out: LeftOut | None = None) -> list[Source]:
    """Every source named by ``inputs``, deduplicated (one file reached by several paths is one source, named
    by the path given first, with the caption any of them gave), in a stable order.

    A directory contributes its video files (by extension, recursively, dot-files and dot-folders
    left out, symbolic links to folders followed, each folder and file once however many links
    reach it, so a link loop ends; a broken link with a video extension is kept, and its run records why it
    failed); a glob its matches; a ``.jsonl``/``.csv`` manifest its ``path`` entries (relative to
    the manifest) and their optional ``caption``; any other path is taken as a video as given. Raises ``ValueError`` for an input
    that names nothing (a glob without matches, a missing path) or a manifest without a path column.

    ``exclude`` (the output folder) and everything under it is never input: directories and globs
    skip it, and a file named there explicitly is an error (it would read a run's clips back as input).
    ``left_out`` collects what folders held and the walk did not take: folders it could not list
    (with why), files not named like videos (sidecar captions of a video taken are not counted), hidden ones.
    """
    out: dict[object, Source] = {}
    skip = os.path.realpath(exclude) if exclude is not None else None
    left_out = left_out if left_out is not None else LeftOut()
    for item in inputs:
        for source, key in _expand_one(str(item), skip, left_out):
            out[key] = _one_caption(out.get(key), source)
    return list(out.values())


def _identity(path: str) -> object:
    """Which file ``path`` is: inputs may reach one video by several paths (a folder and a manifest
    entry through a link to it, a hard link, another case on a case-insensitive disk), each a video of
    its own by path (clipped twice, the folder's copy uncaptioned). A path that names no file is its own."""
    try:
        st = os.stat(path)
    except OSError:
        return path
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else path


def _one_caption(known: Source | None, source: Source) -> Source:
    """The source a video named twice keeps: the path named first, with the caption either naming gave
    (``vfm curate footage/ captions.jsonl`` lists a captioned video once without a caption, the folder, and
    once with, the manifest). Two different captions for one video are refused: picking one would silently
    lose the other."""
    if known is None:
        return source
    if known.caption is None or source.caption is None or known.caption == source.caption:
        return replace(known, caption=known.caption if known.caption is not None else source.caption)
    also = "" if source.path == known.path else f" (also named {source.path!r})"
    raise ValueError(f"video {known.path!r}{also} is given two captions, {known.caption!r} and {source.caption!r} "
                     "(by two manifest entries); accepted: one caption per video")


def _inside(path: str | Path, folder: str | None) -> bool:
    return folder is not None and _under(os.path.realpath(path), folder)


def _under(real: str, folder: str | None) -> bool:
    """The resolved path ``real`` is the resolved ``folder`` or lies under it."""
    return folder is not None and (real == folder or real.startswith(folder.rstrip(os.sep) + os.sep))


def _named(path: str | Path) -> tuple[Source, object]:
    """The source of a path named outside a folder walk, with its :func:`_identity`."""
    source = Source(_resolve(Path(path)))
    return source, _identity(source.path)


def _expand_one(item: str, skip: str | None, left_out: LeftOut, explicit: bool = True) -> list[tuple[Source, object]]:
    """The sources ``item`` names, each with its :func:`_identity` (a folder's from its walk's one stat per file)."""
    path = Path(item)
    if path.is_dir():
        return [(Source(_resolve(p)), key) for p, key in _walk(path, left_out, skip)]
    if path.is_file() and path.suffix.lower() in MANIFEST_EXTENSIONS:
        sources = read_manifest(path)
        for source in sources:
            if _inside(source.path, skip):
                raise ValueError(f"{path}: entry {source.path!r} is inside the output folder {skip}; accepted: "
                                 "videos outside it (a run never reads its own output)")
        return [(source, _identity(source.path)) for source in sources]
    if path.exists():
        if _inside(path, skip):
            if not explicit:
                return []
            raise ValueError(f"input {item!r} is inside the output folder {skip}; accepted: videos outside it "
                             "(a run never reads its own output)")
        return [_named(path)]
    if path.is_symlink():  # a broken link: named, an error; matched by a glob, a failure of its own (as in a folder)
        if not explicit:
            return [_named(path)]
        raise ValueError(f"input {item!r} is a {link_problem(path)}")
    if glob.has_magic(item):
        matches = sorted(glob.glob(item, recursive=True))
        if not matches:
            raise ValueError(f"input glob {item!r} matches no file")
        return [s for m in matches if Path(m).is_file() or (Path(m).is_symlink() and not Path(m).exists())
                for s in _expand_one(m, skip, left_out, explicit=False)]
    raise ValueError(f"input {item!r} does not exist (accepted: video files, directories, globs, .jsonl/.csv manifests)")


def sidecar_names(video: str, suffix: str) -> tuple[str, str]:
    """The names of ``video``'s caption sidecar of ``suffix`` (``.txt``, ``.json``), in the order
    :func:`vfm_curator.stages.caption.sidecar_caption` tries them: ``a.txt`` and ``a.mp4.txt``
    beside ``a.mp4``. The walk does not count them as left out: they are used with their video."""
    return str(Path(video).with_suffix(suffix)), f"{video}{suffix}"


SIDECAR_SUFFIXES = (".txt", ".json")


def _walk(root: Path, left_out: LeftOut, skip: str | None = None) -> list[tuple[Path, object]]:
    """The video files under ``root`` (by extension; dot-files and dot-folders left out), sorted, each with
    its :func:`_identity`. Symbolic links to folders are followed (a dataset is often a folder of links), every
    real folder is read once (a link back up the tree, or two links to one folder, add nothing), so is
    every file (a symbolic or hard link to a file listed already adds nothing; the name kept is
    the first in sorted order that is not a symbolic link), and a link whose target is missing is listed (opening it fails with that
    reason: not a silent skip). What it leaves out goes into ``left_out``: a folder it cannot list
    (no permission, gone while walked...) with its reason, the walk going on with the others; files
    not named like videos by extension; dot-files and dot-folders. The output folder ``skip`` is not
    walked, nor is a file linked from inside it taken.

    One stat per video file (the listing's: scandir knows links and folders from the listing itself), and
    a file's path is resolved only when it is a link: on NFS with millions of files each call is a round trip."""
    found: dict[object, tuple[bool, Path]] = {}
    seen: set[str] = set()

    def not_read(exc: OSError) -> None:
        folder = str(exc.filename) if exc.filename is not None else str(root)
        left_out.not_read.setdefault(_resolve(Path(folder)), exc.strerror or str(exc))

    folders = [str(root)]  # depth first, each folder's subfolders in sorted order (as os.walk goes top-down)
    while folders:
        folder = folders.pop()
        real = os.path.realpath(folder)
        if real in seen:
            continue
        seen.add(real)
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError as exc:
            not_read(exc)
            continue
        dirs, files = [], []
        for entry in entries:
            try:
                is_dir = entry.is_dir()  # through a link, as os.walk(followlinks=True) sorts them
            except OSError:
                is_dir = False
            (dirs if is_dir else files).append(entry)
        left_out.hidden += sum(e.name.startswith(".") for e in entries)
        folders += sorted((e.path for e in dirs if not e.name.startswith(".") and not _inside(e.path, skip)),
                          reverse=True)
        names = {e.name for e in files}
        videos = {n for n in names if not n.startswith(".") and Path(n).suffix.lower() in VIDEO_EXTENSIONS}
        sidecars = {n for v in videos for suffix in SIDECAR_SUFFIXES for n in sidecar_names(v, suffix)}
        # a file here is under the output folder only as a link's target: the folder itself is not under it
        # (its subfolders under it are not walked), unless the walk started there
        here_under = _under(real, skip)
        for entry in files:
            name = entry.name
            if name.startswith("."):
                continue
            if name not in videos:
                if name not in sidecars:
                    ext = Path(name).suffix.lower()
                    left_out.not_video[ext] = left_out.not_video.get(ext, 0) + 1
                continue
            p = Path(folder, name)
            try:
                is_link = entry.is_symlink()
                if here_under or (is_link and _inside(p, skip)):
                    continue
                st = entry.stat()  # one stat (through links): is it a file, and which one
            except OSError:
                st = None
            if st is not None and stat.S_ISREG(st.st_mode):
                key: object = (st.st_dev, st.st_ino)  # one file under two names (links) is read once
                if key not in found or (is_link, p) < found[key]:
                    found[key] = (is_link, p)
            elif st is None:  # a link whose target is missing, a file that cannot be read: listed, so it fails with its reason
                found[_resolve(p)] = (False, p)
    return sorted(((p, key) for key, (_, p) in found.items()), key=lambda pair: pair[0])


def read_manifest(path: Path) -> list[Source]:
    """``.jsonl``: one object per line with ``path`` (or ``video``) and optional ``caption``;
    ``.csv``: a header with a ``path`` column and an optional ``caption`` column."""
    base = path.parent
    rows: list[dict] = []
    if path.suffix.lower() == ".jsonl":
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{n}: not a JSON object ({exc})") from exc
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{n}: expected a JSON object with 'path', got {type(row).__name__}")
            rows.append(row)
    else:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    sources = []
    for n, row in enumerate(rows, 1):
        key = "path" if row.get("path") is not None else "video"
        value = row.get(key)
        if value is None or value == "":
            raise ValueError(f"{path}: entry {n} has no 'path' (columns/keys: {', '.join(map(str, row))})")
        if not isinstance(value, str):
            raise ValueError(f"{path}: entry {n}: {key!r} is {type(value).__name__} {value!r}; accepted: a string (a file path)")
        caption = row.get("caption")
        if caption is not None and not isinstance(caption, str):
            raise ValueError(f"{path}: entry {n}: 'caption' is {type(caption).__name__} {caption!r}; accepted: a string or null")
        p = Path(value)
        sources.append(Source(_resolve(p if p.is_absolute() else base / p), caption if caption else None))
    return sources


def link_problem(path: str | Path) -> str:
    """Why the symbolic link ``path`` leads to no file: its target is missing, or links point at each
    other (``a -> b``, ``b -> a``), or its target is a link whose chain ends at a missing file (in both
    the target exists as a link, so "it does not exist" would mislead: the missing file is named)."""
    target = os.readlink(path)
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return (f"symbolic link loop: it points to {target!r}, and following the links never reaches a file "
                    "(links that point at each other); accepted: a link to a video file")
    if os.path.islink(os.path.join(os.path.dirname(path), target)):
        missing = os.path.realpath(path)  # where following the links stops
        return f"broken symbolic link: it points to {target!r}, a link that leads to {missing!r}, which does not exist"
    return f"broken symbolic link: it points to {target!r}, which does not exist"


def _resolve(path: Path) -> str:
    return os.path.abspath(str(path))
