"""What a curation run reports: :class:`Summary` (counts, throughput, failures by kind, the lines the
CLI prints), the :class:`Progress` protocol a display implements, and the helpers that read a
finished folder's clip table and failure records into it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol


class Progress(Protocol):
    """What a progress display implements (the CLI's rich bars do)."""

    def start(self, stages: list[str], total: int) -> None: ...

    def advance(self, stage: str, n: int) -> None: ...

    def stop(self) -> None: ...


class FailureReport:
    """What a clipping and a sharding summary share: a JSON-able dict and the most common failure
    (from ``failure_kinds``: kind -> {count, reason, cause})."""

    failure_kinds: dict[str, dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]  # subclasses are dataclasses

    def top_failure(self) -> tuple[str, dict[str, Any]] | None:
        """(kind, {count, reason, cause}) of the most common failure."""
        if not self.failure_kinds:
            return None
        return max(self.failure_kinds.items(), key=lambda kv: kv[1]["count"])


#: What to do about finished videos a re-run skipped although their options or inputs changed.
REDO_ADVICE = "re-run with --redo-changed (their clips are replaced) or curate into a new output folder"


@dataclass
class Summary(FailureReport):
    """What a run did. ``*_total`` fields describe the whole output folder (all runs)."""

    out: str
    videos: int = 0  # inputs named this time
    videos_total: int = 0  # source videos with a record in the output folder (finished or failed, all runs), each once
    processed: int = 0  # videos run this time
    skipped: int = 0  # finished (or failed for good) in an earlier run
    retried: int = 0  # failed before and run again this time (--retry-failed, machine cause, changed config/input)
    failures: int = 0  # failed videos in the output folder, and failed redos of finished ones (their clips kept)
    clips: int = 0  # clips in clips.parquet (every finished video of the folder)
    uncaptioned: int = 0  # of those, clips without a caption (`vfm shard` fails them unless --no-require-captions)
    hours_in: float = 0.0  # video hours of every finished input (ok ones)
    hours_out: float = 0.0  # clip hours written
    wall_s: float = 0.0
    video_s_processed: float = 0.0  # seconds of video run through this time
    throughput: float = 0.0  # video seconds per wall second, this run
    workers: dict[str, int] = field(default_factory=dict)  # final auto-balancer allocation
    fused: list[list[str]] = field(default_factory=list)  # stages that ran one after another in one worker (Ray)
    duplicates: int = 0  # clips taken out of clips.parquet as near-duplicates ([dedup]; review.jsonl)
    captions_flagged: int = 0  # clips kept with a caption under the caption_qa thresholds
    captions_dropped: int = 0  # clips taken out of clips.parquet for their caption (caption_qa action = drop)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    decoders: dict[str, int] = field(default_factory=dict)  # videos decoded by each decoder backend, this run
    # finished videos that decoded well short of their declared length (truncated or damaged files)
    decoded_short: int = 0
    # videos skipped as finished although made with other stage options: the first changed stage -> count
    other_options: dict[str, int] = field(default_factory=dict)
    # finished videos skipped although their input changed since: "file" / "caption" -> count
    changed_inputs: dict[str, int] = field(default_factory=dict)
    redone: int = 0  # finished videos clipped again for a changed file, caption or options (redo_changed)
    # inputs not clipped because they hold a finished video's bytes and caption (moved or copied): path -> that video's source
    copies: dict[str, str] = field(default_factory=dict)
    # videos finished this run whose file changed (size or time) after the run looked at it: a copy still going
    changed_while_curated: list[str] = field(default_factory=list)
    # the folder's failed videos by failures.jsonl 'kind': {count, reason (the first one's), cause}
    failure_kinds: dict[str, dict[str, Any]] = field(default_factory=dict)
    # folders among the inputs' that could not be listed (their videos were not read): folder -> why
    folders_not_read: dict[str, str] = field(default_factory=dict)
    # what the input folders held that was not taken as video (io.inputs.LeftOut.line), or None
    left_out: str | None = None
    # a moved video's old clip files that no finished video names (a run killed while it replaced them), deleted
    orphans_removed: int = 0

    def problem(self) -> str | None:
        """One line when the output folder holds no clip (every video failed, or the filters kept
        nothing): ``vfm curate`` exits non-zero with it, as ``vfm shard`` does with no sample."""
        if self.clips:
            return None
        top = self.top_failure()
        if top is None:
            return f"no clip written: no clip of the {self.videos_total} videos passed the filters; see {Path(self.out) / 'report.html'}"
        kind, f = top
        if self.failures == self.videos_total:
            what = "the video failed" if self.failures == 1 else f"all {self.failures} videos failed"
        else:
            what = f"{self.failures} of {self.videos_total} videos failed and the others gave no clip"
        return (f"no clip written: {what} ({self._kinds()}); the most common reason: {f['reason']}; "
                f"see {Path(self.out) / 'failures.jsonl'}")

    def failures_line(self) -> str | None:
        """``N videos failed (kind count, ...): OUT/failures.jsonl``, when any did."""
        if not self.failures:
            return None
        return f"{self.failures} video{'s' if self.failures != 1 else ''} failed ({self._kinds()}): {Path(self.out) / 'failures.jsonl'}"

    def workers_text(self) -> str:
        """``stage=n, ...``; fused stages (one worker runs them in turn) as one ``first..last=n (k stages
        fused)`` entry, so 8 stages fused on 2 CPUs read as 2 workers, not 16."""
        group_of = {stage: tuple(group) for group in self.fused for stage in group}
        parts, seen = [], set()
        for stage, n in self.workers.items():
            group = group_of.get(stage)
            if group is None:
                parts.append(f"{stage}={n}")
            elif group not in seen:
                seen.add(group)
                parts.append(f"{group[0]}..{group[-1]}={n} ({len(group)} stages fused)")
        return ", ".join(parts)

    def other_options_line(self) -> str | None:
        """One line when finished videos were skipped although this run's stage options differ from theirs."""
        if not self.other_options:
            return None
        n = sum(self.other_options.values())
        stages = ", ".join(sorted(self.other_options))
        return (f"{n} video{'s' if n != 1 else ''} finished before with other options (changed from stage {stages} on) "
                f"{'were' if n != 1 else 'was'} skipped and kept{' as they were' if n != 1 else ' as it was'}; to apply "
                f"the new options, {REDO_ADVICE}")

    def changed_inputs_line(self) -> str | None:
        """One line when finished videos were skipped although their file or caption changed since."""
        if not self.changed_inputs:
            return None
        n = sum(self.changed_inputs.values())
        what = ", ".join(f"{k} {'replaced' if k == 'file' else 'changed'} {v}" for k, v in sorted(self.changed_inputs.items()))
        return (f"{n} finished video{'s' if n != 1 else ''} changed since {'they were' if n != 1 else 'it was'} clipped "
                f"({what}) {'were' if n != 1 else 'was'} skipped and kept as clipped; to clip the new versions, "
                f"{REDO_ADVICE}")

    def copies_line(self) -> str | None:
        """One line when inputs were not clipped because they are finished videos at another path."""
        if not self.copies:
            return None
        n = len(self.copies)
        path, of = next(iter(self.copies.items()))
        return (f"{n} input{'s' if n != 1 else ''} {'hold' if n != 1 else 'holds'} the bytes and caption of a video this "
                f"folder has clipped (moved or copied) and {'were' if n != 1 else 'was'} not clipped again, e.g. "
                f"{path} = {of}; all are listed in summary.json ('copies')")

    def changed_while_curated_line(self) -> str | None:
        """One line when videos finished this run although their file changed while they were read (a
        copy or download still writing it): their clips hold only what was there then."""
        if not self.changed_while_curated:
            return None
        n, first = len(self.changed_while_curated), self.changed_while_curated[0]
        return (f"{n} video{'s' if n != 1 else ''} changed while {'they were' if n != 1 else 'it was'} curated (the file "
                f"grew or was rewritten: a copy still going?), e.g. {first!r}; {'their' if n != 1 else 'its'} clips hold "
                f"what the file held when it was read. Once the file is complete, re-run with --redo-changed "
                f"(the clips are replaced); all are listed in summary.json ('changed_while_curated')")

    def not_read_lines(self, most: int = 10) -> list[str]:
        """``FOLDER: REASON`` for each input folder that could not be listed, up to ``most``, then how many more."""
        lines = [f"{folder}: {why} (its videos were not read)" for folder, why in list(self.folders_not_read.items())[:most]]
        if len(self.folders_not_read) > most:
            lines.append(f"{len(self.folders_not_read) - most} more folders, all listed in summary.json ('folders_not_read')")
        return lines

    def _kinds(self) -> str:
        return ", ".join(f"{k} {f['count']}" for k, f in sorted(self.failure_kinds.items(), key=lambda kv: -kv[1]["count"]))


def uncaptioned(table: Path) -> int:
    """Rows of a clip table whose caption is missing or blank."""
    import pyarrow.parquet as pq

    captions = pq.read_table(table, columns=["caption"]).column("caption").to_pylist()
    return sum(not (c or "").strip() for c in captions)


def failure_kinds(failed: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Failed records by their failure's kind (its stage when it has none): count, the first reason, cause."""
    kinds: dict[str, dict[str, Any]] = {}
    for record in sorted(failed, key=lambda r: str(r.get("source", ""))):
        failure = record.get("failure") or {}
        kind = str(failure.get("kind") or failure.get("stage") or "unknown")
        entry = kinds.setdefault(kind, {"count": 0, "reason": failure.get("reason", ""), "cause": failure.get("cause", "")})
        entry["count"] += 1
    return kinds


def failure_line(record: dict[str, Any]) -> dict[str, Any]:
    """A record's line in failures.jsonl: source, stage, reason, cause, kind, attempts, and for a
    failed redo what it kept (:func:`listed_failures`)."""
    failure = record.get("failure") or {}
    keep = ("stage", "reason", "cause", "kind", "attempts")
    kept = {"kept": record["kept"]} if record.get("kept") else {}
    return {"source": record.get("source", ""), **{k: failure[k] for k in keep if k in failure}, **kept}


def listed_failures(ok: list[dict[str, Any]], failed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The failures a folder lists (failures.jsonl, the report, the summary's count): the failed
    records, and the failed redos of finished videos (``--redo-changed``), which replaced nothing
    (:func:`vfm_curator.io.state.record_failure`): an ok record's ``redo_failure``, or a failed
    record of a moved video whose ``replaces`` names a video still finished. Those say in ``kept``
    which clips stayed, also in the reason the report shows."""
    finished = {r.get("video_id"): r for r in ok}
    listed = []
    for record in failed:
        replaced = finished.get((record.get("replaces") or {}).get("video_id"))
        listed.append(_kept_by(record, record.get("failure") or {}, replaced) if replaced else record)
    for record in ok:
        redo = record.get("redo_failure")
        if isinstance(redo, dict):
            listed.append(_kept_by({**record, "status": "failed", "source": redo.get("source", record.get("source"))},
                                   redo, record))
    return listed


def _kept_by(record: dict[str, Any], failure: dict[str, Any], finished: dict[str, Any]) -> dict[str, Any]:
    """``record`` as a listed failure that kept ``finished``'s clips."""
    kept = f"the redo failed; the earlier clips ({int(finished.get('clips') or 0)}) are kept, of {finished.get('source', '')}"
    return {**record, "failure": {**failure, "reason": f"{failure.get('reason', '')} ({kept})"}, "kept": kept}
