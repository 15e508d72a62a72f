"""``transcode``: re-encode each clip's exact frame span to H264 (audio dropped unless ``keep_audio``)."""

from __future__ import annotations

import errno
from pathlib import Path

from vfm_curator.io import staging
from vfm_curator.io.encode import ENCODERS, H264Writer, mux_audio, nvenc_available, pick_codec, resize
from vfm_curator.io.paths import disk_full
from vfm_curator.io.video import iter_decoded, release_freed_memory, threads_given
from vfm_curator.stages.base import InputError, Resources, Stage
from vfm_curator.stages.split import make_clip
from vfm_curator.tasks import Clip, VideoTask


class TranscodeStage(Stage):
    """One decoding pass over the source; frame ``i`` goes to the clip whose span ``[start, end)``
    holds it, so every clip has exactly ``end - start`` frames at the source's average frame rate.
    A variable-frame-rate source (decode's ``meta["vfr"]``) is put on a constant grid at that rate
    instead (:func:`frame_copies`): each output frame shows the source frame on screen at its time,
    so motion keeps its real speed (a phone's 30 -> 15 fps stretch no longer plays twice as fast).

    Also keeps ``samples`` (first, middle and last frame, longer side <= ``sample_size``) for the
    embed and caption stages and the report's thumbnails. With ``out`` (the output folder; the
    clipping pipeline sets it) each clip and its samples go to staging files there as they are
    encoded (:mod:`vfm_curator.io.staging`) and the task carries their paths, so its size does not
    grow with the video's length; without it they stay in memory (``clip.mp4``, ``clip.samples``).
    ``encoder="auto"`` (default) uses NVENC when a probe at start opens an ``h264_nvenc`` encoder
    here (:func:`vfm_curator.io.encode.nvenc_probe`), else libx264 with a one-line notice; both write
    H264 High profile, yuv420p, in mp4. libx264 takes ``crf``/``preset`` and ``threads`` encoder
    threads (see :func:`encoder_threads`); NVENC takes ``crf`` as its constant-quality level. A
    worker that encodes with NVENC asks Ray for ``gpu_share`` of a GPU (Ray hides GPUs from workers
    that ask for none). Audio is dropped by default (training clips are silent);
    ``keep_audio=True`` copies the span's audio packets into the clip unchanged.
    """

    name = "transcode"
    resources = Resources(cpus=1.0, memory_mb=1024)
    defaults = {"encoder": "auto", "crf": 20, "preset": "veryfast", "sample_size": 224, "hwaccel": None,
                "keep_audio": False, "out": None, "threads": None, "gpu_share": 0.1}

    def check_options(self) -> None:
        self.option_range("crf", lo=0, hi=51, integer=True)
        self.option_range("sample_size", lo=1, integer=True)
        self.option_range("gpu_share", lo=0, hi=1, lo_open=True)
        if self.opt["threads"] is not None:
            self.option_range("threads", lo=0, integer=True)
        if self.opt["encoder"] not in ENCODERS:
            raise ValueError(f"stage 'transcode': unknown encoder {self.opt['encoder']!r}; accepted: {', '.join(ENCODERS)}")
        if self.opt["encoder"] == "h264_nvenc":  # asked for by name: say now, before any work, if it cannot open
            try:
                pick_codec("h264_nvenc")
            except ValueError as exc:
                raise ValueError(f"stage 'transcode': {exc}") from None

    @property
    def configured_resources(self) -> Resources | None:
        """A GPU share when the encoder will be NVENC (the probe opens it here)."""
        if self.opt["encoder"] == "libx264" or not nvenc_available():
            return None
        return self.gpu_share_resources()

    def setup(self) -> None:
        self.codec = pick_codec(self.opt["encoder"])  # the probe, once per process; a notice when auto falls back
        self.threads = encoder_threads(self.opt["threads"])

    def process_one(self, task: VideoTask) -> None:
        clips = sorted(task.clips, key=lambda c: c.start)
        if not clips:
            return
        try:
            self._encode(task, clips)
        except BaseException as exc:
            for clip in clips:  # a failed video leaves no staging file behind
                staging.discard(clip)
            if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise disk_full(Path(self.opt["out"] or ".") / staging.FOLDER) from exc
            raise

    def _encode(self, task: VideoTask, clips: list[Clip]) -> None:
        fps = float(task.meta["fps"])
        times = grid_times(task)
        k, writer, sample_at, samples, size = 0, None, set(), [], None
        for i, (decoded, rgb) in enumerate(iter_decoded(task.source, hwaccel=self.opt["hwaccel"])):
            if writer is not None and rgb.size != size and clips[k].start < i < clips[k].end:
                # the frame size changes inside this clip (a stream spliced from parts, an adaptive
                # stream's recording): the clip ends here and the rest is a clip of its own, so no
                # clip squeezes frames of another shape into its first frame's size
                clips[k:k + 1] = [make_clip(task, clips[k].start, i), make_clip(task, i, clips[k].end)]
            while k < len(clips) and i >= clips[k].end:
                k = self._finish(task, clips[k], writer, samples, k)
                writer, samples = None, []
            if k == len(clips):
                break
            clip = clips[k]
            if i < clip.start:
                continue
            if writer is None:
                size = rgb.size
                path = self._staging(task, clip, "mp4")
                writer = H264Writer(fps, codec=self.codec, crf=int(self.opt["crf"]), preset=str(self.opt["preset"]),
                                    path=None if path is None else str(path), threads=self.threads)
                sample_at = {clip.start, (clip.start + clip.end - 1) // 2, clip.end - 1}
            for _ in range(1 if times is None else frame_copies(times, i, clip, fps)):
                if not (rgb.square and writer.write_decoded(decoded)):  # non-square pixels: scaled to square
                    writer.write(rgb(), source=decoded)
            if i in sample_at:
                samples.append(resize(rgb(), int(self.opt["sample_size"])))
        while k < len(clips):  # the file ended early (truncated): keep what was written, if complete
            k = self._finish(task, clips[k], writer, samples, k)
            writer, samples = None, []
        task.clips = [c for c in clips if c.encoded]
        if not task.clips:
            raise InputError(f"no clip could be encoded: the file ended or broke before any of the {len(clips)} span(s) was complete")
        if self.opt["keep_audio"]:
            origin = float(task.meta.get("start_time", 0.0))  # the first frame's time in the source's own clock
            for clip in task.clips:
                with_audio = mux_audio(clip.mp4 if clip.staged is None else clip.staged, task.source,
                                       origin + clip.start_s, origin + clip.end_s)
                if clip.staged is None:
                    clip.mp4 = with_audio
                else:
                    Path(clip.staged).write_bytes(with_audio)
                    clip.staged_size = len(with_audio)

    def _staging(self, task: VideoTask, clip: Clip, suffix: str) -> Path | None:
        """Where a clip's file goes: a staging file in the output folder, or None (in memory)."""
        if not self.opt["out"]:
            return None
        return staging.staging_path(self.opt["out"], task.vid, clip.id, int(task.context.get("attempt", 1)), suffix)

    def _finish(self, task: VideoTask, clip: Clip, writer, samples: list, k: int) -> int:
        if writer is None:
            return k + 1
        data = writer.close()
        path = writer.path
        if writer.count == output_frames(task, clip):
            clip.num_frames = writer.count
            clip.height, clip.width = writer.stream.height, writer.stream.width
            if path is None:
                clip.mp4, clip.samples = data, samples
            else:
                clip.staged, clip.staged_size = str(path), path.stat().st_size
                if samples:
                    samples_path = self._staging(task, clip, "samples.npz")  # made here (created exclusively)
                    clip.samples_file = str(samples_path)  # so a failed write's file is discarded with the clip
                    staging.save_samples(samples_path, samples)
        elif path is not None:  # fewer frames than detected: drop the clip instead of writing a short one
            path.unlink(missing_ok=True)
        release_freed_memory()
        return k + 1


def frame_copies(times, i: int, clip: Clip, fps: float) -> int:
    """How many frames of the clip's constant grid at ``fps`` source frame ``i`` fills (0: it is
    dropped, 2+: it stays on screen that long): output frame ``j`` shows the source frame on screen at
    ``clip.start_s + j / fps``. A frame is on screen until the next source frame, the clip's last one
    until the clip's ``end_s`` (the next clip's start, or one frame at the video's end or before a
    pause), so a clip cut short later (a frame-size change inside it) has the frames it counts."""
    t0 = times[clip.start]
    until = times[i + 1] if i + 1 < clip.end else clip.end_s
    return int(round((until - t0) * fps)) - int(round((times[i] - t0) * fps))


def grid_times(task: VideoTask):
    """The source frames' times when its clips are put on a constant grid (a variable-frame-rate
    source with times and a frame rate), else None: each source frame then is one output frame."""
    return task.times if task.meta.get("vfr") and task.times is not None and float(task.meta["fps"]) > 0 else None


def output_frames(task: VideoTask, clip: Clip) -> int:
    """The frames a complete clip has: its source frames, or (variable frame rate) the constant grid's
    over its seconds, ``start_s`` to ``end_s`` (:func:`frame_copies` summed over the clip)."""
    if grid_times(task) is None:
        return clip.length
    return int(round((clip.end_s - clip.start_s) * float(task.meta["fps"])))


def encoder_threads(option: int | None) -> int:
    """libx264's thread count: the ``threads`` option when set (0: libx264's own choice, about 1.5
    per core); else ``OMP_NUM_THREADS`` when set, else 0. In a Ray worker ``OMP_NUM_THREADS`` is
    the CPUs its call was given (the runner defaults it to 1): the balancer already runs one
    transcode per CPU, and a single-threaded x264 spends ~12 % less CPU per frame than one that
    also threads across cores it shares. One process alone (the serial runner) keeps x264's
    threads. The encoded bytes depend on the thread count (not on anything else)."""
    if option is not None:
        return int(option)
    return threads_given()
