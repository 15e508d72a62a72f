"""The Python API of ``vfm curate`` and ``vfm shard``: a run that writes nothing to go on with raises
:class:`~vfm_curator.errors.NothingWrittenError`, where the commands exit 1, instead of returning
an empty summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vfm_curator.config import CurateConfig
from vfm_curator.errors import NothingWrittenError
from vfm_curator.pipelines.clipping import run_clipping
from vfm_curator.pipelines.summary import FailureReport, Progress, Summary

#: How many failure kinds besides the commonest one the error names (with a reason each).
OTHER_KINDS = 2


def curate(
    inputs: str | Path | list[str | Path],
    out: str | Path,
    config: CurateConfig | dict[str, Any] | str | Path | None = None,
    *,
    progress: Progress | None = None,
    retry_failed: str | None = None,
    redo_changed: bool = False,
) -> Summary:
    """Cut ``inputs`` (video files, directories, globs, .jsonl/.csv manifests) into clips in ``out``.

    ``config``: a :class:`CurateConfig`, a dict of the same shape, or a .toml/.json file. Returns a
    :class:`Summary`. Re-running with the same ``out`` skips videos that finished before; failed
    ones are run again by the rule of :mod:`vfm_curator.failures` (``retry_failed``: ``"all"``, a
    cause ``input``/``config``/``machine`` or a reason kind forces it). Finished videos whose file,
    caption or stage options changed since are skipped and counted in the summary, or clipped again
    with ``redo_changed`` (their clips replaced).

    Raises :class:`~vfm_curator.errors.NothingWrittenError` when ``out`` holds no clip afterwards
    (every video failed, or the filters kept none): its message names the failures and their
    commonest reasons, its ``summary`` is the run's; failures.jsonl and report.html are written first.
    """
    if isinstance(inputs, (str, Path)):
        inputs = [inputs]
    if isinstance(config, (str, Path)):
        config = CurateConfig.load(config)
    elif isinstance(config, dict):
        config = CurateConfig.from_dict(config)
    summary = run_clipping([str(i) for i in inputs], out, config, progress=progress, retry_failed=retry_failed,
                           redo_changed=redo_changed)
    _raise_if_empty(summary)
    return summary


def shard(clips_dir: str | Path, out: str | Path, config: Any = None, *, progress: Progress | None = None,
          retry_failed: str | None = None, redo_changed: bool = False, **overrides: Any):
    """Shard the curated clips of ``clips_dir`` (``vfm curate``'s output) into ``out``.

    ``config``: a :class:`~vfm_curator.ShardConfig`, a dict of the same shape, or a .toml/.json file;
    ``overrides``: its fields (``tokenizer="causal3d"``, ``frames=[17]``, ...) that replace the
    config's. Returns a :class:`~vfm_curator.ShardSummary`. Re-running with the same ``out`` skips
    clips already in finished shards; ``retry_failed`` (``"all"``, a cause or a reason kind) runs
    failed clips again; ``redo_changed`` replaces the samples of clips changed in the clip table (or
    gone from it) since they were sharded.

    Raises :class:`~vfm_curator.errors.NothingWrittenError` when the run leaves nothing to train on
    (the shards hold no sample, or none of the clips this run tried was written), as ``vfm shard``
    exits 1: its message names how many clips failed, the commonest reasons and failures.jsonl, its
    ``summary`` is the run's; the finished shards, failures.jsonl and summary.json are written first.
    """
    from vfm_curator.pipelines.sharding import shard as run_shard

    summary = run_shard(clips_dir, out, config, progress=progress, retry_failed=retry_failed, redo_changed=redo_changed,
                        **overrides)
    _raise_if_empty(summary)
    return summary


def _raise_if_empty(summary: Any) -> None:
    """:class:`NothingWrittenError` with the summary's problem line, the other commonest failure
    reasons and where failures.jsonl is, when the summary has a problem (the commands' exit 1)."""
    problem = summary.problem()
    if problem is None:
        return
    raise NothingWrittenError(problem_text(summary), summary, Path(summary.out) / "failures.jsonl")


def problem_text(summary: FailureReport) -> str:
    """The summary's problem line, then up to :data:`OTHER_KINDS` other failure kinds with a reason
    each, then failures.jsonl's path (when it is not named yet and something failed)."""
    text = summary.problem() or ""
    see = f"; see {Path(summary.out) / 'failures.jsonl'}"  # type: ignore[attr-defined]  # both summaries have out
    text = text.removesuffix(see)
    kinds = sorted(summary.failure_kinds.items(), key=lambda kv: -kv[1]["count"])
    others = [f"{kind} {f['count']} ({f['reason']})" for kind, f in kinds[1:1 + OTHER_KINDS]]
    if others:
        text += f"; next most common: {', '.join(others)}"
    return text + see if kinds else text
