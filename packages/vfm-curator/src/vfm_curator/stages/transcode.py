"""``transcode``: re-encode each clip's exact frame span to H264 (audio dropped unless ``keep_audio``)."""

from __future__ import annotations

from vfm_curator.io.encode import H264Writer, mux_audio, pick_codec, resize
from vfm_curator.io.video import iter_frames, release_freed_memory
from vfm_curator.stages.base import InputError, Resources, Stage
from vfm_curator.tasks import VideoTask


class TranscodeStage(Stage):
    """One decoding pass over the source; frame ``i`` goes to the clip whose span ``[start, end)``
    holds it, so every clip has exactly ``end - start`` frames at the source's average frame rate.

    Also keeps ``samples`` (first, middle and last frame, longer side <= ``sample_size``) for the
    embed and caption stages and the report's contact sheet. ``encoder="auto"`` uses NVENC when a
    GPU has it, else libx264 with ``crf``/``preset``. Audio is dropped by default (training clips
    are silent); ``keep_audio=True`` copies the span's audio packets into the clip unchanged.
    """

    name = "transcode"
    resources = Resources(cpus=1.0, memory_mb=1024)
    defaults = {"encoder": "libx264", "crf": 20, "preset": "veryfast", "sample_size": 224, "hwaccel": None,
                "keep_audio": False}

    def check_options(self) -> None:
        self.option_range("crf", lo=0, hi=51, integer=True)
        self.option_range("sample_size", lo=1, integer=True)
        if self.opt["encoder"] not in ("auto", "libx264", "h264_nvenc"):
            raise ValueError(f"stage 'transcode': unknown encoder {self.opt['encoder']!r}; accepted: auto, libx264, h264_nvenc")

    def setup(self) -> None:
        self.codec = pick_codec(self.opt["encoder"])

    def process_one(self, task: VideoTask) -> None:
        clips = sorted(task.clips, key=lambda c: c.start)
        if not clips:
            return
        fps = float(task.meta["fps"])
        k, writer, sample_at = 0, None, set()
        for i, (_, frame) in enumerate(iter_frames(task.source, hwaccel=self.opt["hwaccel"])):
            while k < len(clips) and i >= clips[k].end:
                k = self._finish(clips[k], writer, k)
                writer = None
            if k == len(clips):
                break
            clip = clips[k]
            if i < clip.start:
                continue
            if writer is None:
                writer = H264Writer(fps, codec=self.codec, crf=int(self.opt["crf"]), preset=str(self.opt["preset"]))
                sample_at = {clip.start, (clip.start + clip.end - 1) // 2, clip.end - 1}
            writer.write(frame)
            if i in sample_at:
                clip.samples.append(resize(frame, int(self.opt["sample_size"])))
        while k < len(clips):  # the file ended early (truncated): keep what was written, if complete
            k = self._finish(clips[k], writer, k)
            writer = None
        task.clips = [c for c in clips if c.mp4 is not None]
        if not task.clips:
            raise InputError(f"no clip could be encoded: the file ended or broke before any of the {len(clips)} span(s) was complete")
        if self.opt["keep_audio"]:
            for clip in task.clips:
                clip.mp4 = mux_audio(clip.mp4, task.source, clip.start / fps, clip.end / fps)

    @staticmethod
    def _finish(clip, writer, k: int) -> int:
        if writer is not None and writer.count == clip.length:
            clip.mp4 = writer.close()
            clip.num_frames = writer.count
            clip.height, clip.width = writer.stream.height, writer.stream.width
        elif writer is not None:
            writer.close()  # fewer frames than detected: drop the clip instead of writing a short one
        if writer is not None:
            release_freed_memory()
        return k + 1
