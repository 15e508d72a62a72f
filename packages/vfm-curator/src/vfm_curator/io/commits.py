"""A video's new files take their final names in one commit step, so a redo that fails or is killed
part-way never leaves new clip bytes under the records of the old clips (clip ids are the source and
span: a video clipped again overwrites its clips in place).

The write stage writes every new file aside first, under a temporary name in its final folder
(``.<vid>.*.tmp``: the transcode stage's staging files, thumbnails, the metadata part), then writes
``OUT/.state/commits/<vid>.json``: each (temporary, final) name, the files the new clipping no longer
has, and the video's new record. Writing that file is the commit:

- before it exists no final name has changed: a failure or a kill leaves the video's earlier clips,
  part and record whole (a failed redo keeps them), and the temporary files are deleted (by the
  write stage, the driver's sweep, or the next run's sweep of ``.*.tmp``);
- once it exists the commit is carried out (:func:`finish`: renames, removals, the record, then the
  commit file deleted) by the write stage, else by the driver when the task comes back, else by the
  next run before anything else. Each step can be done again, so a kill during it is finished later.

``clips.parquet`` is rebuilt only at the end of a run: a commit that replaces files first writes
``.state/table_outdated``, which that end removes, and readers of the table (``vfm shard``) refuse the
folder while it or a commit is there (:func:`check_table_current`).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Iterable

from vfm_plugins import json_data
from vfm_plugins.files import remove_leftover, temporary_file

from vfm_curator.io.paths import atomic_rename, atomic_write, open_if_file, output_path, safe_join
from vfm_curator.io.state import STATE, VIDEO_ID, write_record

FOLDER = "commits"
#: ``.state/<this>``: a commit replaced files that ``clips.parquet`` may list; removed once a run's end
#: rebuilt the table (:func:`table_rebuilt`). Until then the table does not describe the clip files.
OUTDATED = "table_outdated"
#: The folders a commit may rename into or delete from (a commit file is data on disk: one naming
#: anything else was not written by vfm curate and is refused), so those its files are written aside in.
ASIDE_FOLDERS = ("clips", "thumbs", f"{STATE}/parts")


def commit_path(out: str | Path, vid: str) -> Path:
    if not VIDEO_ID.fullmatch(vid):
        raise ValueError(f"video id {vid!r} cannot name a commit; accepted: letters, digits, '_' and '-'")
    return output_path(out, STATE, FOLDER, f"{vid}.json")


def aside(final: Path, vid: str) -> Path:
    """A new empty temporary file beside ``final`` for video ``vid`` (swept as any ``.*.tmp``)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    return temporary_file(final.parent, prefix=f".{vid}.{final.name}.", suffix=".tmp")


def write_aside(final: Path, vid: str, data: bytes) -> Path:
    """``data`` in a new temporary file beside ``final`` (fsynced: a commit may name it after a crash)."""
    tmp = aside(final, vid)
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def commit(out: str | Path, vid: str, moves: Iterable[tuple[Path, Path]], drop: Iterable[Path], record: dict[str, Any]) -> None:
    """Write video ``vid``'s commit: from then on its new files are its files (:func:`finish` puts them
    in place). Atomic: a failure here leaves no commit, and the earlier files stay the video's."""
    out, moves = Path(out).resolve(), list(moves)
    entry = {
        "moves": [[_relative(out, tmp), _relative(out, final)] for tmp, final in moves],
        "drop": sorted(_relative(out, path) for path in drop),
        "record": record,
    }
    if entry["drop"] or any(os.path.lexists(final) for _, final in moves):  # a redo: not only new files
        atomic_write(output_path(out, STATE, OUTDATED), b"")
    atomic_write(commit_path(out, vid), json.dumps(entry, sort_keys=True).encode("utf-8"))


def table_rebuilt(out: str | Path) -> None:
    """``clips.parquet`` was rebuilt from the records and parts: it describes the clip files again."""
    remove_leftover(output_path(out, STATE, OUTDATED))


def finish(out: str | Path, vid: str) -> dict[str, Any] | None:
    """Carry out video ``vid``'s commit if one is written and not yet done; returns the record it
    wrote (None: no commit there). Each step can be done again: a temporary file already renamed is gone."""
    path = commit_path(out, vid)
    try:
        entry = _read(path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: the commit of video {vid} cannot be read ({exc}); it names the files of that "
                         "video's last clipping: delete it to keep the video's earlier files, and run again") from None
    if entry is None:
        return None
    moves, drop, record = _checked(out, vid, path, entry)
    for tmp, final in moves:
        if os.path.lexists(tmp):
            atomic_rename(tmp, final)
    for gone in drop:
        remove_leftover(gone)
    write_record(out, vid, record)
    remove_leftover(path)
    return record


def finish_all(out: str | Path) -> None:
    """Carry out every commit a killed run left (called holding the folder's lock, before anything reads)."""
    for vid in pending_videos(out):
        finish(out, vid)


def pending_videos(out: str | Path) -> list[str]:
    """The videos whose written commit is not carried out yet, sorted: regular files
    ``.state/commits/<video id>.json`` (a link there is no commit vfm curate wrote: never followed)."""
    try:
        folder = safe_join(out, STATE, FOLDER)
    except ValueError:  # a link out of the folder: not ours (check_out_folder names it)
        return []
    try:
        names = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    vids = [name.removesuffix(".json") for name in names if name.endswith(".json")]
    return [vid for vid in vids if VIDEO_ID.fullmatch(vid) and _regular_file(folder / f"{vid}.json")]


def check_table_current(out: str | Path) -> None:
    """Refuse to read the curation ``out`` while a commit is not carried out, or one was and the run
    ended before it rebuilt ``clips.parquet``: that video's clip files are the new ones while the
    table lists the old (captions, embeddings). Not finished from here: that takes the curation's
    lock, and the table is rebuilt and reviewed (dedup, caption QA) with that run's options, which
    only its vfm curate has."""
    vids = pending_videos(out)
    try:
        outdated = _regular_file(output_path(out, STATE, OUTDATED))  # a link there is not ours
    except ValueError:  # .state is a link out of the folder: not ours (check_out_folder names it)
        outdated = False
    if vids or outdated:
        what = (f"{len(vids)} not yet swapped in: .state/commits/{vids[0]}.json{', ...' if len(vids) > 1 else ''}"
                if vids else f".state/{OUTDATED}")
        raise ValueError(f"{out}: a vfm curate into it stopped (or still runs) after clipping videos again and before "
                         f"rebuilding clips.parquet ({what}), so the table does not describe its clip files; run the "
                         "same vfm curate again to finish (once none runs there), then this command")


def pending(out: str | Path, vid: str | None = None) -> set[Path]:
    """The temporary files that written commits name (``vid``'s only, when given: a commit names no
    other video's, see :func:`_checked`): not leftovers, whatever sweep meets them."""
    names: set[Path] = set()
    for video in pending_videos(out) if vid is None else [vid]:
        try:
            entry = _read(commit_path(out, video))
            names.update(Path(out).resolve() / tmp for tmp, _ in entry.get("moves", []))
        except (OSError, ValueError, TypeError, AttributeError):
            continue
    return names


def _regular_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:  # carried out meanwhile (a run still going)
        return False


def _read(path: Path) -> Any:
    """The commit file at ``path`` as JSON; None when there is none (a link there is none: not followed)."""
    fd = open_if_file(path, os.O_RDONLY)
    if fd is None:
        return None
    with os.fdopen(fd, encoding="utf-8") as fh:
        return json_data.loads(fh.read())


def _relative(out: Path, path: Path) -> str:
    return Path(path).relative_to(out).as_posix()


def _checked(out: str | Path, vid: str, where: Path, entry: Any) -> tuple[list[tuple[Path, Path]], list[Path], dict]:
    """The commit's names as paths in the folder; a commit naming anything vfm curate never writes
    there (another folder, a name out of it, a temporary file of another video) is refused whole."""
    def refuse(what: str) -> ValueError:
        return ValueError(f"{where}: {what}; accepted: a commit vfm curate wrote (temporary files .{vid}.*.tmp renamed "
                          f"to files of {', '.join(sorted(ASIDE_FOLDERS))}); delete it to keep the video's earlier files")

    if not isinstance(entry, dict) or not isinstance(entry.get("record"), dict) or entry["record"].get("video_id") != vid:
        raise refuse("it is not a commit of this video")
    moves, drop = [], []
    for pair in entry.get("moves") or []:
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)):
            raise refuse(f"a move {pair!r} is not two names")
        tmp, final = (_in_folder(out, p, refuse) for p in pair)
        if tmp.parent != final.parent or not (tmp.name.startswith(f".{vid}.") and tmp.name.endswith(".tmp")):
            raise refuse(f"{pair[0]!r} is not a temporary file of this video beside {pair[1]!r}")
        moves.append((tmp, final))
    for name in entry.get("drop") or []:
        if not isinstance(name, str):
            raise refuse(f"a file to delete {name!r} is not a name")
        drop.append(_in_folder(out, name, refuse))
    return moves, drop, entry["record"]


def _in_folder(out: str | Path, name: str, refuse) -> Path:
    relative = Path(name)
    if relative.is_absolute() or ".." in relative.parts or relative.parent.as_posix() not in ASIDE_FOLDERS:
        raise refuse(f"{name!r} is not a file of {', '.join(sorted(ASIDE_FOLDERS))}")
    return output_path(out, *relative.parts)
