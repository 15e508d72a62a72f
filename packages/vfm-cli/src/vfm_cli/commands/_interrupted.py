"""The line ``vfm curate`` and ``vfm shard`` print on Ctrl-C: what this run finished and left in the
output folder (counted on disk, against a look taken before the run), and the command that resumes."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from vfm_plugins import json_data
from vfm_plugins.text import counted


def resume_command(name: str) -> str:
    """The command as typed (``vfm`` + its arguments, quoted for a shell), or a description when the
    command did not come from a command line (a test's CliRunner, Python)."""
    args = sys.argv[1:]
    return f"vfm {shlex.join(args)}" if name in args else f"the same vfm {name} command"


def _stamps(files) -> dict[str, int]:
    """path -> modification time (ns): a file rewritten by this run counts as this run's."""
    stamps = {}
    for path in files:
        try:
            stamps[str(path)] = path.stat().st_mtime_ns
        except OSError:  # gone meanwhile
            pass
    return stamps


def _new(before: dict[str, int], now: dict[str, int]) -> list[str]:
    return sorted(path for path, stamp in now.items() if before.get(path) != stamp)


def _are(n: int) -> str:
    return "is" if n == 1 else "are"


def curate_records(out: Path) -> dict[str, int]:
    """The finished videos' records in ``out`` (vfm-curator writes one last, once a video is done)."""
    try:
        return _stamps((Path(out) / ".state" / "videos").glob("*.json"))
    except OSError:
        return {}


def curate_interrupted(out: Path, before: dict[str, int]) -> str:
    """The Ctrl-C line of ``vfm curate``: how many videos this run finished (kept) and how to resume."""
    now = curate_records(out)
    new = _new(before, now)
    command = resume_command("curate")
    if not new:
        if not Path(out).exists():
            return f"interrupted before any video finished: nothing was written ({out} does not exist); to start again: {command}"
        earlier = f"{out} holds only the {counted(len(now), 'video')} earlier runs finished" if now else \
            f"nothing is kept in {out}"
        return f"interrupted before any video of this run finished: {earlier}; to resume: {command}"
    failed = 0
    for path in new:
        try:
            failed += json_data.loads(Path(path).read_text(encoding="utf-8")).get("status") == "failed"
        except (OSError, ValueError):
            pass
    of_them = f" ({failed} of them failed)" if failed else ""
    return (f"interrupted: {counted(len(new), 'video')} finished by this run{of_them} {_are(len(new))} kept in {out}; "
            f"clips.parquet, failures.jsonl and report.html take them in when a run of the folder ends; "
            f"videos not finished are done again; to resume: {command}")


def shard_files(out: Path) -> dict[str, int]:
    """The finished shards in ``out`` (vfm-data gives a shard its final name only once it is complete)."""
    from vfm_curator.pipelines.shard_files import bucket_dirs, shards

    try:
        return _stamps(s for d in bucket_dirs(Path(out)) for s in shards(d))
    except OSError:
        return {}


def shard_interrupted(out: Path, before: dict[str, int]) -> str:
    """The Ctrl-C line of ``vfm shard``: how many samples this run put in finished shards (kept) and how to resume."""
    from vfm_curator.pipelines.shard_files import shard_keys

    new = _new(before, shard_files(out))
    command = resume_command("shard")
    if not new:
        if not Path(out).exists():
            return f"interrupted before any shard was finished: nothing was written ({out} does not exist); to start again: {command}"
        return (f"interrupted before this run finished a shard: nothing of this run is kept in {out} (a shard is kept once "
                f"complete); to resume: {command}")
    samples = 0
    for path in new:
        try:
            samples += len(shard_keys(Path(path)))
        except Exception:  # a damaged tar (tarfile raises several kinds): counted as none, the re-run checks it
            pass
    return (f"interrupted: {counted(samples, 'sample')} in {counted(len(new), 'shard')} finished by this run {_are(samples)} kept in "
            f"{out}; blend.yaml and the energon index take them in when a run of the folder ends; samples of unfinished "
            f"shards are done again; to resume: {command}")
