"""``caption``: attach existing captions (manifest or sidecar file), or ask a registered captioner.

No caption is ever made up: a clip with no existing caption and no captioner keeps ``None``. Each
clip records where its caption came from in ``clip.caption_by`` (``captioner``: manifest, sidecar or
the registered name, plus the captioner's ``provenance``: model, prompt), which goes into
``clips.parquet``, the shards' metadata and the report.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Iterable

from vfm_curator.errors import InputError, StopRun
from vfm_curator.failures import classify
from vfm_curator.io.inputs import sidecar_names
from vfm_curator.stages.base import Resources, Stage
from vfm_curator.tasks import VideoTask


def sidecar_caption(source: str) -> str | None:
    """``<video>.txt`` (the whole text) or ``<video>.json`` (its ``"caption"``) next to the video."""
    for candidate in map(Path, sidecar_names(source, ".txt")):
        if _is_file(candidate):
            text = candidate.read_text(encoding="utf-8", errors="replace").strip()
            if text:
                return text
    for candidate in map(Path, sidecar_names(source, ".json")):
        if _is_file(candidate):
            try:
                value = json.loads(candidate.read_text(encoding="utf-8")).get("caption")
            except (ValueError, AttributeError, RecursionError):  # not a JSON object: no caption of its own
                continue
            if isinstance(value, str) and value.strip():
                return value.strip()
    return None


def _is_file(path: Path) -> bool:
    """Whether a sidecar is there; a name the filesystem cannot hold (``<video>.mp4.txt`` past 255
    bytes: ENAMETOOLONG) names no sidecar rather than failing its video."""
    try:
        return path.is_file()
    except OSError:
        return False


class CaptionStage(Stage):
    """Order: the manifest's caption, then a sidecar file, then (if ``captioner`` is set) the
    registered captioner on the clip's sampled frames (``overwrite=True`` captions every clip).

    A captioner with ``caption_many(list of frame lists) -> list of str | exception`` gets all the
    clips of a video in one call (the endpoint captioner keeps several requests in flight). A clip
    whose caption failed fails its video with the error's cause and kind (a machine failure, such as
    a server that stopped answering, is retried by the usual rule, see vfm_curator.failures); the
    reason names how many clips failed and the first error."""

    name = "caption"
    resources = Resources(cpus=1.0, memory_mb=2048)
    defaults = {"captioner": None, "captioner_options": {}, "overwrite": False, "gpu_share": 0.5}

    @property
    def configured_resources(self) -> Resources | None:
        """``gpu_share`` of a GPU per worker when the captioner will run on CUDA (its ``device``
        option or default resolves to CUDA here); the class's resources otherwise."""
        from vfm_curator.stages.embed import gpu_resources

        if not isinstance(self.opt["captioner_options"], dict):
            return None
        return gpu_resources(self, "captioners", self.opt["captioner"], self.opt["captioner_options"])

    def check_options(self) -> None:
        self.option_range("gpu_share", lo=0, hi=1, lo_open=True)
        if not isinstance(self.opt["captioner_options"], dict):
            raise ValueError(f"stage 'caption': captioner_options must be a table of options, got {self.opt['captioner_options']!r}")
        if self.opt["captioner"]:
            from vfm_curator.plugins import host

            try:
                cls = host.get("captioners", self.opt["captioner"])
            except KeyError as exc:  # an unknown name: the error lists the registered ones
                raise ValueError(f"stage 'caption': {exc.args[0]}") from None
            options = dict(self.opt["captioner_options"])
            check = getattr(cls, "check_options", None)  # a cheap check in the driver, before any work
            if check is not None:
                check(**options)
                return
            try:  # at least the option names, without building it (that may load a model)
                inspect.signature(cls).bind(**options)
            except TypeError as exc:
                accepted = ", ".join(p for p in inspect.signature(cls).parameters if p not in ("args", "kwargs"))
                raise ValueError(f"stage 'caption': captioner {self.opt['captioner']!r}: {exc}; accepted: {accepted}") from None

    def setup(self) -> None:
        self.captioner = None
        if self.opt["captioner"]:
            from vfm_curator.captioners import get_captioner

            self.captioner = get_captioner(self.opt["captioner"], **dict(self.opt["captioner_options"]))

    def process_one(self, task: VideoTask) -> None:
        existing, origin = task.caption, "manifest"
        if not existing:
            existing, origin = sidecar_caption(task.source), "sidecar"
        todo = []
        for clip in task.clips:
            clip.caption = existing
            clip.caption_by = {"captioner": origin} if existing is not None else {}
            if self.captioner is not None and clip.has_samples and (clip.caption is None or self.opt["overwrite"]):
                todo.append(clip)
        if not todo:
            return
        made = dict(getattr(self.captioner, "provenance", None) or {})
        by = {"captioner": str(self.opt["captioner"]), **{k: str(v) for k, v in made.items()}}
        failed = []
        # frames are read as the captioner asks for them (a staged clip's samples live in a file)
        for clip, result in zip(todo, caption_clips(self.captioner, (c.samples for c in todo), len(todo))):
            if isinstance(result, BaseException):
                failed.append((clip, result))
                continue
            clip.caption = result or None
            clip.caption_by = dict(by) if clip.caption is not None else {}
        if failed:
            clip, first = failed[0]
            cause, kind = classify(first)
            why = str(first) if isinstance(first, InputError) else f"{type(first).__name__}: {first}"
            message = f"captioning failed for {len(failed)} of {len(task.clips)} clips (first: clip {clip.id}: {why})"
            raise CaptionError(message, cause=cause, kind=kind) from first


class CaptionError(InputError):
    """One or more clips of a video could not be captioned (the cause and kind of the first failure)."""

    def __init__(self, message: str, *, cause: str, kind: str) -> None:
        super().__init__(message)
        self.cause, self.kind = cause, kind

    def __reduce__(self):  # rebuilt with its keywords, so it crosses processes (Ray workers)
        return _caption_error, (str(self), self.cause, self.kind)


def _caption_error(message: str, cause: str, kind: str) -> CaptionError:
    return CaptionError(message, cause=cause, kind=kind)


def caption_clips(captioner, clips: Iterable[list], count: int) -> list:
    """Each of the ``count`` clips' caption (a string) or the exception its captioner raised for it."""
    if hasattr(captioner, "caption_many"):
        results = list(captioner.caption_many(clips))
        if len(results) != count:
            raise ValueError(f"captioner {type(captioner).__name__}.caption_many returned {len(results)} results for {count} clips")
        return results
    results = []
    for frames in clips:
        try:
            results.append(captioner.caption(frames))
        except StopRun:
            raise
        except Exception as exc:  # noqa: BLE001 - kept per clip; the stage decides what it means
            results.append(exc)
    return results
