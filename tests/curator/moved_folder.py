"""A curated folder of inputs moved elsewhere with one caption changed since: the setup of the tests
of moved, recaptioned videos (``--redo-changed`` clips them again in place of their old records)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq

import vfm_curator
from vfm_curator.synth import make_video

SERIAL = {"run": {"runner": "serial"}}


def moved_and_recaptioned(tmp_path: Path) -> tuple[Path, Path, int]:
    """``in/a.mp4`` (captioned) and ``in/b.mp4`` clipped into ``out``, then the folder moved to
    ``moved/`` and a's caption changed. Returns (moved folder, out, clips of the first run)."""
    make_video(tmp_path / "in" / "a.mp4", [24, 24], seed=1)
    make_video(tmp_path / "in" / "b.mp4", [30], seed=2)
    (tmp_path / "in" / "a.txt").write_text("a red square")
    out = tmp_path / "out"
    first = vfm_curator.curate(tmp_path / "in", out, SERIAL)
    shutil.move(tmp_path / "in", tmp_path / "moved")
    (tmp_path / "moved" / "a.txt").write_text("a red square moves left")
    return tmp_path / "moved", out, first.clips


def clip_rows(out: Path) -> list[dict]:
    """The clip table's id, source and caption of each row: what a replaced or kept video changes."""
    return pq.read_table(out / "clips.parquet", columns=["id", "source", "caption"]).to_pylist()
