"""vfm-infer: samplers, guidance, context-parallel denoising and video output.

``VideoPipeline.from_export(folder).generate(prompt, GenerationSpec(...))`` makes a video (C, T, H, W)
in [-1, 1]; ``write_mp4(path, to_uint8_frames(video), fps)`` writes it. Importing this package is cheap
(no torch): those names load their modules on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from vfm_infer.plugins import hookimpl, host

__version__ = "0.1.0"

_LAZY = {
    "GenerationSpec": "vfm_infer.pipeline", "VideoPipeline": "vfm_infer.pipeline",
    "Sampler": "vfm_infer.samplers.base",
    "to_uint8_frames": "vfm_infer.video.frames", "write_mp4": "vfm_infer.video.mp4",
}
__all__ = ["hookimpl", "host", "get_sampler", *_LAZY]


def get_sampler(name: str):
    """The sampler class registered as ``name`` (``edm-heun``, ``flow-heun``, ``ddim``, ...); call it with
    the steps and its options: ``get_sampler("flow-heun")(32, shift=3.0).sample(denoiser, noise)``, where
    ``denoiser(x, level)`` returns what the sampler's ``formulation`` names. An unknown name is an error
    listing the available ones."""
    return host.get("samplers", name)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'vfm_infer' has no attribute {name!r}")


def __dir__() -> list[str]:
    # the lazy names too, so that help() and tab completion show them
    return sorted({*globals(), *_LAZY})
