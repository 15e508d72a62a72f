"""The Python API of ``vfm curate``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vfm_curator.config import CurateConfig
from vfm_curator.pipelines.clipping import run_clipping
from vfm_curator.pipelines.summary import Progress, Summary


def curate(
    inputs: str | Path | list[str | Path],
    out: str | Path,
    config: CurateConfig | dict[str, Any] | str | Path | None = None,
    *,
    progress: Progress | None = None,
    retry_failed: str | None = None,
) -> Summary:
    """Cut ``inputs`` (video files, directories, globs, .jsonl/.csv manifests) into clips in ``out``.

    ``config``: a :class:`CurateConfig`, a dict of the same shape, or a .toml/.json file. Returns a
    :class:`Summary`. Re-running with the same ``out`` skips videos that finished before; failed
    ones are run again by the rule of :mod:`vfm_curator.failures` (``retry_failed``: ``"all"``, a
    cause ``input``/``config``/``machine`` or a reason kind forces it).
    """
    if isinstance(inputs, (str, Path)):
        inputs = [inputs]
    if isinstance(config, (str, Path)):
        config = CurateConfig.load(config)
    elif isinstance(config, dict):
        config = CurateConfig.from_dict(config)
    return run_clipping([str(i) for i in inputs], out, config, progress=progress, retry_failed=retry_failed)
