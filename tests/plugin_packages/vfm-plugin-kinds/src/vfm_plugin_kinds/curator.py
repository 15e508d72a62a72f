"""The vfm_curator hooks: an embedder, a captioner, a scorer, a shot detector and a decoder."""

import numpy as np

from vfm_curator.decoders.pyav import PyAVDecoder
from vfm_curator.plugins import hookimpl
from vfm_curator.shot_detectors.base import ShotDetector


class MeanColour:
    """The mean RGB of each frame, as a unit vector."""

    dim = 3

    def embed(self, frames):
        x = frames.reshape(len(frames), -1, 3).mean(1).astype(np.float32) + 1e-3
        return x / np.linalg.norm(x, axis=1, keepdims=True)


class Counting:
    """Captions a clip with how many frames it was shown."""

    def __init__(self, prefix: str = "frames") -> None:
        self.prefix = prefix

    def caption(self, frames):
        return f"{self.prefix}: {len(frames)}"


class Constant:
    """A clip score (instances are called as scorer(clip, task))."""

    def __init__(self, value: float = 0.5) -> None:
        self.value = value

    def __call__(self, clip, task):
        return self.value


class EveryN(ShotDetector):
    """A cut every ``frames`` frames."""

    name = "kinds-every"
    defaults = {"frames": 24}

    def check_options(self):
        self.number("frames", lo=1, integer=True)

    def spans(self, scores, *, fps):
        n = self.opt["frames"]
        return [(s, min(s + n, len(scores))) for s in range(0, len(scores), n)]


class KindsPyAV(PyAVDecoder):
    """PyAV under another name."""

    name = "kinds-pyav"


@hookimpl
def vfm_curator_register_embedders(register):
    register("kinds-mean", MeanColour, description="mean colour")


@hookimpl
def vfm_curator_register_captioners(register):
    register("kinds-count", Counting, description="the frame count")


@hookimpl
def vfm_curator_register_scorers(register):
    register("kinds-constant", Constant, description="a constant score")


@hookimpl
def vfm_curator_register_shot_detectors(register):
    register("kinds-every", EveryN, description="a cut every N frames")


@hookimpl
def vfm_curator_register_decoders(register):
    register("kinds-pyav", KindsPyAV, description="PyAV under another name")
