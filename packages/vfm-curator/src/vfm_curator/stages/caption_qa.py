"""``caption_qa``: a score per caption of how well it agrees with its clip, with no one looking.

``scores["caption_clip"]``: the cosine similarity of the caption's text embedding with each of the
clip's sampled frames (CLIP or SigLIP from a local folder), averaged over the frames.
``scores["caption_vlm"]`` (optional second pass): a VLM's mean probability of "yes" to yes/no
questions about the caption and the clip's middle frame. The thresholds are applied over the whole
output folder when the run finishes (:mod:`vfm_curator.pipelines.review`): a z-score needs every
clip's score, and the report lists what was flagged or dropped.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vfm_curator.io.report_review import CLIP_SCORE, VLM_SCORE  # the names the review pass and the report read
from vfm_curator.stages.base import Resources, Stage
from vfm_curator.tasks import Clip, VideoTask

__all__ = ["CLIP_SCORE", "VLM_SCORE", "CaptionQAStage", "agreement", "caption_scores"]
CALIBRATIONS = ("z", "raw")
ACTIONS = ("flag", "drop")


def agreement(text: np.ndarray, frames: np.ndarray) -> float:
    """Mean cosine similarity of one unit text vector ``(D,)`` with unit frame vectors ``(F, D)``."""
    return float(np.mean(frames @ text))


def caption_scores(embedder: Any, clips: list[Clip]) -> list[float | None]:
    """:func:`agreement` of each clip's caption with its sampled frames (None: no caption or no
    frame). ``embedder`` has ``embed(frames) -> (N, D)`` and ``embed_text(texts) -> (M, D)`` unit
    vectors in one space; each distinct caption is embedded once, all frames in one call."""
    todo = [i for i, c in enumerate(clips) if c.caption and c.has_samples]
    if not todo:
        return [None] * len(clips)
    texts = sorted({clips[i].caption for i in todo})
    text_vecs = dict(zip(texts, embedder.embed_text(texts)))
    frames = [_same_size(clips[i].samples) for i in todo]
    h, w = frames[0][0].shape[:2]
    # frames of different sizes (a rotated source) cannot stack together: embed per clip then
    if all(f.shape[:2] == (h, w) for fs in frames for f in fs):
        vecs = embedder.embed(np.stack([f for fs in frames for f in fs]))
        bounds = np.cumsum([0] + [len(fs) for fs in frames])
        per_clip = [vecs[bounds[k]:bounds[k + 1]] for k in range(len(frames))]
    else:
        per_clip = [embedder.embed(np.stack(fs)) for fs in frames]
    scores: list[float | None] = [None] * len(clips)
    for i, vecs in zip(todo, per_clip):
        scores[i] = agreement(text_vecs[clips[i].caption], vecs)
    return scores


class CaptionQAStage(Stage):
    """Scores each kept clip's caption. ``embedder`` names an entry of the ``embedders`` kind with
    ``embed_text`` (``clip``: ``embedder_options={"model_path": <local CLIP or SigLIP folder>}``;
    None: skip this score); ``vlm_options={"model_path": ..., "questions": [...]}`` adds the
    yes/no pass (:class:`vfm_curator.captioners.judge.VLMJudge`).

    Thresholds, applied over the whole folder at the end of the run: ``min_score`` on
    ``caption_clip``, read as a z-score within the folder's scored clips (``calibration="z"``: -2
    means two standard deviations under the folder's mean) or as the raw cosine (``"raw"``: only
    meaningful for the one model it was chosen on); ``min_vlm`` on ``caption_vlm`` (a probability
    in [0, 1]); None switches a threshold off. ``action``: ``flag`` (kept, listed in the report)
    or ``drop`` (taken out of clips.parquet, listed in the report and review.jsonl).
    """

    name = "caption_qa"
    resources = Resources(cpus=1.0, memory_mb=2048)
    batch_size = 2
    defaults = {
        "embedder": "clip", "embedder_options": {}, "vlm_options": {},
        "min_score": -2.0, "calibration": "z", "min_vlm": None, "action": "flag",
    }

    def check_options(self) -> None:
        o = self.opt
        for key in ("embedder_options", "vlm_options"):
            if not isinstance(o[key], dict):
                raise ValueError(f"stage 'caption_qa': {key} must be a table of options, got {o[key]!r}")
        if o["embedder"] is not None and not isinstance(o["embedder"], str):
            raise ValueError(f"stage 'caption_qa': embedder must be an embedder name or none, got {o['embedder']!r}")
        if o["embedder"] == "clip" and not o["embedder_options"].get("model_path"):
            raise ValueError("stage 'caption_qa': embedder_options.model_path is required: a local CLIP or SigLIP folder "
                             "(with its tokenizer); or set embedder = none and use vlm_options")
        if o["embedder"] is None and not o["vlm_options"].get("model_path"):
            raise ValueError("stage 'caption_qa': nothing to score with; set embedder_options.model_path (CLIP/SigLIP) "
                             "or vlm_options.model_path (a VLM)")
        if o["calibration"] not in CALIBRATIONS:
            raise ValueError(f"stage 'caption_qa': calibration {o['calibration']!r}; accepted: {', '.join(CALIBRATIONS)}")
        if o["action"] not in ACTIONS:
            raise ValueError(f"stage 'caption_qa': action {o['action']!r}; accepted: {', '.join(ACTIONS)}")
        score = o["min_score"]
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float)) or score != score):
            raise ValueError(f"stage 'caption_qa': min_score must be a number or none, got {score!r}")
        if o["min_vlm"] is not None:
            self.option_range("min_vlm", lo=0.0, hi=1.0)

    def setup(self) -> None:
        self.embedder = self.judge = None
        if self.opt["embedder"]:
            from vfm_curator.embedders import get_embedder

            self.embedder = get_embedder(self.opt["embedder"], **dict(self.opt["embedder_options"]))
            if not hasattr(self.embedder, "embed_text"):
                raise ValueError(f"embedder {self.opt['embedder']!r} embeds no text (it has no embed_text); use 'clip'")
        if self.opt["vlm_options"].get("model_path"):
            from vfm_curator.captioners.judge import VLMJudge

            self.judge = VLMJudge(**dict(self.opt["vlm_options"]))

    def process_one(self, task: VideoTask) -> None:
        clips = [c for c in task.clips if c.rejected is None]
        if self.embedder is not None:
            for clip, score in zip(clips, caption_scores(self.embedder, clips)):
                if score is not None:
                    clip.scores[CLIP_SCORE] = score
        if self.judge is not None:
            for clip in clips:
                if clip.caption and clip.has_samples:
                    clip.scores[VLM_SCORE] = self.judge.agreement(clip.samples, clip.caption)


def _same_size(frames: list[np.ndarray]) -> list[np.ndarray]:
    h, w = frames[0].shape[:2]
    return [f for f in frames if f.shape[:2] == (h, w)]
