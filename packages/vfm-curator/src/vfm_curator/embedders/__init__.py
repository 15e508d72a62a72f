"""Image/video embedders: ``embed(frames (N, H, W, 3) uint8) -> (N, D) float32`` unit vectors.

Registered under the ``embedders`` kind; the ``embed`` and ``stitch`` stages look them up by name.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np


class Embedder(Protocol):
    dim: int

    def embed(self, frames: np.ndarray) -> np.ndarray: ...


def get_embedder(name: str, **options: Any) -> Embedder:
    """Build the registered embedder ``name`` with ``options``."""
    from vfm_curator.plugins import host

    return host.build("embedders", name, options)


def normalize(x: np.ndarray) -> np.ndarray:
    return (x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)).astype(np.float32)
