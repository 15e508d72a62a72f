"""The settings a shards folder was made with: a resumed run must match its identity
(``shard_config.json``), and a change of bucket options since the last run is told
(``.state/bucketing.json``)."""

from __future__ import annotations

import json
from pathlib import Path

from vfm_plugins import json_data

from vfm_curator.io.paths import atomic_write, output_path, read_text_if_file, safe_join
from vfm_curator.pipelines import shard_state
from vfm_curator.pipelines.shard_config import BUCKETING, IDENTITY, SPLIT_RULE_KEY, SPLITTING, ShardConfig
from vfm_curator.pipelines.shard_files import bucket_dirs, shards
from vfm_curator.pipelines.shard_split import SPLIT_HASHES


#: The format of a shards folder's ``shard_config.json`` (its ``format_version``), which stands for the
#: folder (its buckets, ``.state/``): bumped when an older vfm shard would misread the folder. A file
#: without the field (written before it) is format 1.
SHARD_CONFIG_FORMAT = 1


def check_shard_config_format(out: Path) -> int:
    """The format of ``out``'s ``shard_config.json`` (1 without the field, or without the file); a newer
    one (or one that is no JSON object) is refused in one line naming the file and what to do. Reads
    only: checked before the run takes the folder's lock or writes anything."""
    from vfm_plugins.formats import check_json_format

    return check_json_format(safe_join(out, "shard_config.json"), what="vfm shards folder", current=SHARD_CONFIG_FORMAT,
                             package="vfm-curator", missing=1) or SHARD_CONFIG_FORMAT


def _write_config(out: Path, mine: dict) -> None:
    data = {**mine, "split_hashes": SPLIT_HASHES, "format_version": SHARD_CONFIG_FORMAT}
    atomic_write(output_path(out, "shard_config.json"), json.dumps(data, indent=2, sort_keys=True).encode("utf-8"))


def _holds_shards(out: Path) -> bool:
    return any(shards(folder) for folder in bucket_dirs(out))


def _check_identity(out: Path, config: ShardConfig) -> None:
    """Bind ``out`` to this run's identity (``shard_config.json``), or refuse a run whose settings or
    split rule differ from those of the shards it holds."""
    path = safe_join(out, "shard_config.json")
    mine = json.loads(json.dumps(config.identity()))
    try:
        recorded = json_data.loads(read_text_if_file(path))
    except FileNotFoundError:  # none yet, or a pipe, a device or a link (a folder from elsewhere: one hung a resume)
        _write_config(out, mine)
        return
    theirs = {**SPLITTING, **recorded}  # a folder made before val_fraction was made with its default
    splits = bool(theirs.get("val_fraction") or mine["val_fraction"])
    if SPLIT_RULE_KEY not in theirs or not splits:
        # A folder written before the rule was recorded is taken as split by this vfm's rule: one of
        # fraction 0 (the default, and every such folder but a development build's) put no clip in val
        # by any rule; in one with a fraction (a 0.1.0 development build's: split by the clip table's
        # video_id) every video it holds keeps its side (shard_pins), only videos new to it follow the
        # rule. Nor does the rule bind a folder that holds nothing out: no rule placed anything there.
        theirs[SPLIT_RULE_KEY] = mine[SPLIT_RULE_KEY]
    diff = sorted(k for k in (*IDENTITY, *SPLITTING, SPLIT_RULE_KEY) if theirs.get(k) != mine[k])
    # a run that wrote no shard (e.g. its text encoder could not be set up) binds nothing: the
    # corrected command into the same folder takes it over with its own settings
    if diff and not _holds_shards(out):
        _write_config(out, mine)
    elif diff:
        raise ValueError(_other_settings(out, theirs, mine, diff))
    elif "format_version" not in recorded or recorded.get(SPLIT_RULE_KEY) != mine[SPLIT_RULE_KEY]:
        _write_config(out, mine)  # format 1 as written before the field, now with the rule it is topped up by


def _other_settings(out: Path, theirs: dict, mine: dict, diff: list[str]) -> str:
    """The refusal of a run into ``out`` with other settings (``diff``) than its shards were made with."""
    why = []
    if "val_fraction" in diff:
        why.append("a changed val_fraction would move clips between the train and val splits")
    if SPLIT_RULE_KEY in diff:
        why.append("this vfm splits by another rule: new clips of a video sharded there could go to the other "
                   "split than its old ones")
    todo = ("use the same settings to resume, or a new output folder" if diff != [SPLIT_RULE_KEY] else
            "shard into a new output folder, or top this one up with the vfm that made it")
    return (f"{out} holds shards made with other settings "
            f"({', '.join(f'{k}: {theirs.get(k)!r} there, {mine[k]!r} now' for k in diff)})"
            f"{''.join(f' ({w})' for w in why)}; {todo}")


def _last_bucketing(out: Path) -> dict | None:
    """The bucket options of the last finished run into ``out`` (None: no run finished yet)."""
    try:
        theirs = json_data.loads(read_text_if_file(safe_join(out, shard_state.STATE, "bucketing.json")))
    except (OSError, ValueError):
        return None
    return theirs if isinstance(theirs, dict) else None


def _windows_raised(out: Path, config: ShardConfig, sharded: int) -> bool:
    """Whether ``windows`` asks for more samples per clip than the last run into ``out`` did (0 is
    every window), so the ``sharded`` clips of its finished shards must get their missing windows:
    the existing windows stay valid only when the other bucket options are the last run's (same
    bucket, frame count and stride), else the run is refused naming both changes."""
    theirs = _last_bucketing(out)
    if not sharded or theirs is None:
        return False
    before, now = theirs.get("windows"), config.windows
    if not isinstance(before, int) or before == 0 or (now != 0 and now <= before):
        return False
    mine = json.loads(json.dumps({k: getattr(config, k) for k in BUCKETING}))
    other = [k for k in BUCKETING if k != "windows" and theirs.get(k) != mine[k]]
    if other:
        changes = ", ".join(f"{k} {theirs.get(k)!r} -> {mine[k]!r}" for k in other)
        raise ValueError(
            f"{out}: windows {before!r} -> {now!r} together with {changes} since the last run into this folder: the "
            f"{sharded} clips sharded before hold at most {before} window(s) each and cannot get the others under the "
            f"new options (their windows would not match); raise windows alone (keep "
            f"{', '.join(f'{k} = {theirs.get(k)!r}' for k in other)}) to add them, or shard into a new folder")
    return True


def _bucketing_notice(out: Path, config: ShardConfig, kept: int) -> list[str]:
    """A line when this run's bucket options differ from the last run's into ``out`` while clips
    sharded then are kept (they are not re-bucketed); records this run's options for the next."""
    path = safe_join(out, shard_state.STATE, "bucketing.json")
    mine = json.loads(json.dumps({k: getattr(config, k) for k in BUCKETING}))
    try:
        theirs = json_data.loads(read_text_if_file(path))
    except (OSError, ValueError):
        theirs = None
    atomic_write(output_path(out, shard_state.STATE, "bucketing.json"), json.dumps(mine, sort_keys=True).encode("utf-8"))
    diff = [k for k in BUCKETING if isinstance(theirs, dict) and theirs.get(k) != mine[k]]
    if not diff or not kept:
        return []
    return [f"{', '.join(f'{k} {theirs.get(k)!r} -> {mine[k]!r}' for k in diff)} since the last run into this folder: the "
            f"{kept} clips sharded before keep their buckets and fitting (only new and failed clips use the new options); "
            "shard into a new folder to re-bucket them all"]
