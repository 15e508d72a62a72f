"""``write``: clips as mp4 files, one metadata part per video, then the video's resume record."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from vfm_curator.io import attempts, commits, input_index, staging
from vfm_curator.io.metadata import to_parquet_bytes
from vfm_curator.io.paths import atomic_write, output_path
from vfm_curator.io.state import finished_record, forget_video, load_record, part_path, part_written_at, record_failure, video_record
from vfm_curator.io.thumbnail import representative_frame
from vfm_curator.stages.base import LimitError, Resources, Stage, run_guarded
from vfm_curator.tasks import Clip, VideoTask, clip_id, video_id
from vfm_plugins.files import remove_leftover


def clip_relpath(clip: Clip) -> str:
    return f"clips/{clip.id}.mp4"


def thumb_relpath(clip: Clip) -> str:
    return f"thumbs/{clip.id}.jpg"


class WriteStage(Stage):
    """Writes ``OUT/clips/<id>.mp4`` and ``OUT/thumbs/<id>.jpg`` for each kept clip, the video's
    metadata part and finally its record (failed videos get a record with the reason). Every new file
    is written aside first (a clip the transcode stage staged in the folder is already:
    :mod:`vfm_curator.io.staging`) and they take their final names in one commit
    (:mod:`vfm_curator.io.commits`): a video clipped again whose write fails part-way keeps its earlier
    clips whole. What is not committed (filtered clips, a failed video) is deleted, also when this
    stage stops on an error. An attempt that the driver no longer waits for (its call was cancelled for the stage
    timeout) writes nothing (:mod:`vfm_curator.io.attempts`). The task it returns is stripped of
    frames and bytes so only a small summary travels back to the driver."""

    name = "write"
    resources = Resources(cpus=0.5, memory_mb=512)
    defaults = {"out": None, "thumbnails": True}

    def process(self, tasks: list[VideoTask]) -> list[VideoTask]:
        self.ensure_setup()
        if not self.opt["out"]:
            raise ValueError("write stage: option 'out' (the output folder) is required")
        for task in tasks:
            aside: list[tuple[Path, Path]] = []  # (temporary, final) of the files written for the commit
            try:
                # only the attempt the driver waits for writes (a call cancelled for the stage
                # timeout may still be running: vfm_curator.io.attempts)
                with attempts.commit_window(self.opt["out"], task.vid, task.context.get("fence")) as current:
                    if current:
                        self._write(task, aside)
            finally:  # what was not committed is not kept (a failed video, a filtered clip, a full disk, a stale attempt)
                for clip in task.clips:
                    staging.discard(clip)
                for tmp, _ in aside:
                    remove_leftover(tmp)
            strip(task)
        return tasks

    def _write(self, task: VideoTask, aside: list[tuple[Path, Path]]) -> None:
        out = self.opt["out"]
        done = commits.finish(out, task.vid)  # this call's own commit, when Ray runs it again (its worker died)
        if done is not None and done.get("attempt_id") == task.context.get("fence"):
            return
        before = clip_ids_of(out, task.vid, task.source)  # a video clipped again (redo_changed)
        moved = _moved_from(task)  # the record of this video at the path it was moved from
        moved_clips = clip_ids_of(out, *moved) if moved is not None else set()
        redo_of_finished = finished_record(out, task.vid) is not None
        if task.failure is None:
            run_guarded(self.name, task, lambda t: self._write_aside(t, aside))
        elif task.clips and not redo_of_finished:  # a kept record's report shows its own filtered clips
            run_guarded(self.name, task, self._write_filtered_thumbs)
        if task.failure is None:
            if moved is not None:
                # before this video's record: a kill in between leaves neither in the
                # table (clipped again next run), never the video twice
                forget_video(out, moved[0], task.source, moved_clips)
            # before the record: a record of an ok video is always in the index
            input_index.note(out, (task.context.get("input") or {}).get("fingerprint"), task.vid)
            commits.commit(out, task.vid, aside, self._replaced(before | moved_clips, task),
                           video_record(task, **self._record_extra(task)))
            aside.clear()  # the commit names them: no longer this attempt's to delete
            for clip in task.clips:
                if clip.rejected is None and clip.encoded:  # a filtered clip's staging file is still deleted
                    clip.staged = None
            commits.finish(out, task.vid)
            return
        # a failed redo replaces nothing: the finished video (at this path, or the one it moved
        # from) keeps its record and clips; only clip files this attempt wrote that no record names go
        kept = record_failure(out, task, **self._record_extra(task))
        # nothing of this attempt took a final name (it had no commit): a kept ok record still names
        # ``before``; a failed one names none of them
        self._drop((set() if kept else before) - moved_clips, task)

    def _write_aside(self, task: VideoTask, aside: list[tuple[Path, Path]]) -> None:
        """Every file of the video's new clipping (clips, thumbnails, metadata part) under a temporary
        name beside its final one, each (temporary, final) added to ``aside`` for the commit."""
        out, vid = self.opt["out"], task.vid

        def put(final: Path, data: bytes) -> None:
            aside.append((commits.write_aside(final, vid, data), final))

        # the final names themselves are not resolved: a link planted there is replaced, never its target
        for final, data in self._filtered_thumbs(task):
            put(final, data)
        rows = []
        for clip in task.clips:
            if clip.rejected is not None or not clip.encoded:
                continue
            final = output_path(out, clip_relpath(clip))
            if clip.staged is not None:
                aside.append((staging.staged_file(clip.staged, final), final))
            else:
                put(final, clip.mp4)
            samples = clip.samples if self.opt["thumbnails"] else []  # read once (from its staging file)
            if samples:
                put(output_path(out, thumb_relpath(clip)), jpeg(representative_frame(samples)))
            rows.append(row(task, clip))
        if not rows:  # every stage before let it through with nothing: still say why it gave no clip
            raise LimitError(f"no clip kept ({len(task.clips)} cut, {sum(c.rejected is not None for c in task.clips)} filtered)")
        put(part_written_at(out, vid), to_parquet_bytes(rows))

    def _filtered_thumbs(self, task: VideoTask) -> Iterator[tuple[Path, bytes]]:
        """(final name, JPEG) of each filtered clip's thumbnail (also of a video whose every clip was
        filtered out): the report shows what was dropped and why."""
        for clip in task.clips:
            samples = clip.samples if clip.rejected is not None and self.opt["thumbnails"] else []
            if samples:
                yield output_path(self.opt["out"], thumb_relpath(clip)), jpeg(representative_frame(samples))

    def _write_filtered_thumbs(self, task: VideoTask) -> None:
        """A failed video's filtered thumbnails, at their final names (it has no earlier clips to keep)."""
        for final, data in self._filtered_thumbs(task):
            atomic_write(final, data)

    def _replaced(self, before: set[str], task: VideoTask) -> list[Path]:
        """The files of the clips an earlier clipping of this video had and this one has not (a
        replaced file cut elsewhere): the table no longer lists them. Ids are the source and span, so
        a clip cut the same again is overwritten in place by the commit. The names are not resolved: a
        link planted at one (a folder from elsewhere) is what is deleted, never the file it points to."""
        kept = {c.id for c in task.clips if c.rejected is None and c.encoded} if task.failure is None else set()
        shown = {c.id for c in task.clips}  # filtered clips keep their thumbnails (the report shows them)
        files = []
        for clip_id in sorted(before - kept):
            files.append(output_path(self.opt["out"], "clips", f"{clip_id}.mp4"))
            if clip_id not in shown:
                files.append(output_path(self.opt["out"], "thumbs", f"{clip_id}.jpg"))
        return files

    def _drop(self, before: set[str], task: VideoTask) -> None:
        for path in self._replaced(before, task):
            remove_leftover(path)

    def _record_extra(self, task: VideoTask) -> dict:
        """What the video's record says of its clips (kept, filtered, thumbnails) beside :func:`video_record`."""
        kept = [c for c in task.clips if c.rejected is None and c.encoded] if task.failure is None else []
        return dict(
            clips=len(kept),
            clip_seconds=sum(c.end_s - c.start_s for c in kept),
            rejected=sum(c.rejected is not None for c in task.clips),
            thumbs=[thumb_relpath(c) for c in kept if self.opt["thumbnails"] and c.has_samples],
            filtered=[filtered_entry(c) for c in task.clips if c.rejected is not None],
        )


def _moved_from(task: VideoTask) -> tuple[str, str] | None:
    """(id, source) of the finished video that the driver found moved to this task's path with
    another caption (``context["replaces"]``, run with ``redo_changed``): this clipping replaces it."""
    moved = task.context.get("replaces") or {}
    vid, source = moved.get("video_id"), moved.get("source")
    if isinstance(vid, str) and isinstance(source, str) and vid == video_id(source) and vid != task.vid:
        return vid, source
    return None


def clip_ids_of(out: str, vid: str, source: str) -> set[str]:
    """Ids of the clips (kept and filtered) that the record of video ``vid`` lists (none for a video
    not clipped before). These name files to delete, so only an id that is this video's clip of the
    span listed with it (:func:`vfm_curator.tasks.clip_id` of ``source``) counts: a record or part
    naming another video's clip (edited, or from a folder made elsewhere) deletes nothing."""
    record = load_record(out, vid)
    if record is None:
        return set()
    entries = [e for e in record.get("filtered") or [] if isinstance(e, dict)]
    try:
        import pyarrow.parquet as pq

        entries += pq.read_table(part_path(out, vid), columns=["id", "start_frame", "end_frame"]).to_pylist()
    except (OSError, ValueError, KeyError):  # no part (a failed video) or one that cannot be read
        pass
    return {str(e.get("id")) for e in entries if _own_clip(source, e)}


def _own_clip(source: str, entry: dict) -> bool:
    try:
        return entry.get("id") == clip_id(source, int(entry["start_frame"]), int(entry["end_frame"]))
    except (KeyError, TypeError, ValueError, OverflowError):
        return False


def row(task: VideoTask, clip: Clip) -> dict:
    return {
        "id": clip.id,
        "video_id": task.vid,
        "source": task.source,
        "path": clip_relpath(clip),
        "start_frame": clip.start,
        "end_frame": clip.end,
        "start_s": clip.start_s,
        "end_s": clip.end_s,
        "fps": float(task.meta.get("fps", 0.0)),
        "width": clip.width,
        "height": clip.height,
        "num_frames": clip.num_frames,
        "embedding": None if clip.embedding is None else clip.embedding.astype("float32").tolist(),
        "caption": clip.caption,
        "caption_by": dict(clip.caption_by),
        "scores": dict(clip.scores),
    }


def filtered_entry(clip: Clip) -> dict:
    """A filtered clip as the record keeps it for the report (no file is written for it)."""
    return {"id": clip.id, "start_frame": clip.start, "end_frame": clip.end, "start_s": clip.start_s,
            "end_s": clip.end_s, "width": clip.width, "height": clip.height, "caption": clip.caption, "caption_by": dict(clip.caption_by),
            "scores": dict(clip.scores), "rejected": clip.rejected}


def jpeg(frame) -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame).save(buf, format="JPEG", quality=85)
    return buf.getvalue()


def strip(task: VideoTask) -> None:
    task.times = task.cut_scores = task.motion = None
    for clip in task.clips:
        clip.mp4 = clip.staged = clip.samples_file = None
        clip.samples = []
        clip.embedding = None
