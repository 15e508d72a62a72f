"""A deterministic in-memory dataset and resumable loader, for tiny runs and trainer tests.

Real runs read shards through vfm-data; this one needs nothing on disk. Its samples are smooth
random blobs (so a model can learn them quickly), with a class label per sample.
"""

from __future__ import annotations

from typing import Any, Iterator

import torch


def make_blobs(num_samples: int, shape: tuple[int, int, int, int], num_classes: int, seed: int = 1234) -> tuple[torch.Tensor, torch.Tensor]:
    """(latents (N, C, T, H, W) in about [-1, 1], labels (N,)): a class-dependent Gaussian blob per frame."""
    c, t, h, w = shape
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, num_classes, (num_samples,), generator=g)
    ys = torch.linspace(-1, 1, h).view(1, 1, h, 1)
    xs = torch.linspace(-1, 1, w).view(1, 1, 1, w)
    angle = 2 * torch.pi * labels.float() / max(num_classes, 1)  # the class sets where the blob sits
    drift = torch.linspace(0, 0.5, t).view(1, t, 1, 1)  # and it moves a little over time
    cy = (0.5 * torch.sin(angle)).view(-1, 1, 1, 1) + drift
    cx = (0.5 * torch.cos(angle)).view(-1, 1, 1, 1)
    blob = torch.exp(-((ys - cy) ** 2 + (xs - cx) ** 2) / 0.15)  # (N, T, H, W)
    colour = torch.rand(num_samples, c, 1, 1, 1, generator=g) * 2 - 1
    latents = colour * blob.unsqueeze(1) + 0.05 * torch.randn(num_samples, c, t, h, w, generator=g)
    return latents, labels


class SyntheticLoader:
    """Yields micro-batches ``{"x0": (B, C, T, H, W), "cond": {"y": (B,)}}`` for one DP rank, forever
    (``cond`` is ``{}`` with ``labels`` None: an unconditional model reads no labels).

    Global micro-batch ``k`` holds samples ``k*B .. k*B+B-1`` (mod N); DP rank ``r`` of ``d`` takes
    global micro-batches ``r, r+d, r+2d, ...``. The state is the number of global micro-batches all
    ranks consumed together, so it resumes under any data-parallel size.
    """

    def __init__(self, latents: torch.Tensor, labels: torch.Tensor | None, micro_batch: int, dp_rank: int = 0,
                 dp_size: int = 1) -> None:
        if not 0 <= dp_rank < dp_size:
            raise ValueError(f"dp_rank must be in [0, {dp_size}), got {dp_rank}")
        self.latents, self.labels = latents, labels
        self.micro_batch, self.dp_rank, self.dp_size = micro_batch, dp_rank, dp_size
        self.consumed = 0  # global micro-batches consumed before this rank's next one (multiple of dp_size)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while True:
            k = self.consumed + self.dp_rank
            idx = (torch.arange(self.micro_batch) + k * self.micro_batch) % len(self.latents)
            self.consumed += self.dp_size
            yield {"x0": self.latents[idx], "cond": {} if self.labels is None else {"y": self.labels[idx]}}

    def state_dict(self) -> dict[str, Any]:
        return {"consumed_global_micro_batches": self.consumed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        consumed = int(state["consumed_global_micro_batches"])
        if consumed % self.dp_size:
            raise ValueError(f"loader state at global micro-batch {consumed} does not divide dp size {self.dp_size}")
        self.consumed = consumed
