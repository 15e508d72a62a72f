"""vfm-curator: clipping and sharding pipelines on Ray with an auto-balancer."""

from __future__ import annotations

from typing import Any

from vfm_curator.plugins import hookimpl, host

__all__ = ["CurateConfig", "NothingWrittenError", "ShardConfig", "ShardSummary", "Summary", "curate", "hookimpl", "host",
           "shard"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Lazy, so that ``import vfm_curator`` (plugin listing) stays free of PyAV, pyarrow and Ray.
    if name in ("curate", "shard"):  # raise NothingWrittenError where the commands exit 1
        from vfm_curator import api

        return getattr(api, name)
    if name == "NothingWrittenError":
        from vfm_curator.errors import NothingWrittenError

        return NothingWrittenError
    if name == "CurateConfig":
        from vfm_curator.config import CurateConfig

        return CurateConfig
    if name == "Summary":
        from vfm_curator.pipelines.summary import Summary

        return Summary
    if name in ("ShardConfig", "ShardSummary"):
        from vfm_curator.pipelines import sharding

        return getattr(sharding, name)
    raise AttributeError(f"module 'vfm_curator' has no attribute {name!r}")


def __dir__() -> list[str]:
    # the lazy names too, so that help() and tab completion show them
    return sorted({*globals(), *__all__})
