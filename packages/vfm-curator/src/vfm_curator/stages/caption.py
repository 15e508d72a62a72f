"""``caption``: attach existing captions (manifest or sidecar file), or ask a registered captioner.

No caption is ever made up: a clip with no existing caption and no captioner keeps ``None``.
"""

from __future__ import annotations

import json
from pathlib import Path

from vfm_curator.stages.base import Resources, Stage
from vfm_curator.tasks import VideoTask


def sidecar_caption(source: str) -> str | None:
    """``<video>.txt`` (the whole text) or ``<video>.json`` (its ``"caption"``) next to the video."""
    path = Path(source)
    for candidate in (path.with_suffix(".txt"), Path(f"{source}.txt")):
        if candidate.is_file():
            text = candidate.read_text(encoding="utf-8", errors="replace").strip()
            if text:
                return text
    for candidate in (path.with_suffix(".json"), Path(f"{source}.json")):
        if candidate.is_file():
            try:
                value = json.loads(candidate.read_text(encoding="utf-8")).get("caption")
            except (ValueError, AttributeError):
                continue
            if isinstance(value, str) and value.strip():
                return value.strip()
    return None


class CaptionStage(Stage):
    """Order: the manifest's caption, then a sidecar file, then (if ``captioner`` is set) the
    registered captioner on the clip's sampled frames (``overwrite=True`` captions every clip)."""

    name = "caption"
    resources = Resources(cpus=1.0, memory_mb=2048)
    defaults = {"captioner": None, "captioner_options": {}, "overwrite": False}

    def setup(self) -> None:
        self.captioner = None
        if self.opt["captioner"]:
            from vfm_curator.captioners import get_captioner

            self.captioner = get_captioner(self.opt["captioner"], **dict(self.opt["captioner_options"]))

    def process_one(self, task: VideoTask) -> None:
        existing = task.caption or sidecar_caption(task.source)
        for clip in task.clips:
            clip.caption = existing
            if self.captioner is not None and clip.samples and (clip.caption is None or self.opt["overwrite"]):
                clip.caption = self.captioner.caption(clip.samples) or None
