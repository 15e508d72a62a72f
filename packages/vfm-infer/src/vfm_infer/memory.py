"""How much memory a generation request needs, estimated before sampling, against what the device
has free: an absurd ``--frames``/``--size`` is refused with the estimate instead of reaching the
allocator (or the OOM killer) after the work has started.

The estimate is an order of magnitude, deliberately on the generous side of what the code holds
at its peak; it exists to catch requests that cannot fit, not to plan tight ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

#: float32 latent-sized tensors a sampler holds at once (x, noise, denoised, derivative, the next
#: point, Heun's second derivative), plus the guidance branches' outputs.
LATENT_COPIES = 8
#: activation tensors of (tokens, hidden) alive in one block's forward besides the MLP's hidden
#: layer (residual, norm, q, k, v, attention output, modulation), under inference mode.
BLOCK_ACTIVATIONS = 8
#: float32 video-sized tensors while decoding and writing (decoder output, clamp, uint8 frames, sheet).
VIDEO_COPIES = 4


def gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


@dataclass(frozen=True)
class MemoryEstimate:
    latent: int  # bytes: the sampler's latent-sized tensors
    activations: int  # bytes: one transformer block's forward over the batch (both guidance branches)
    video: int  # bytes: the decoded video

    @property
    def total(self) -> int:
        return self.latent + self.activations + self.video

    def describe(self) -> str:
        return (f"about {gib(self.total)} (sampler latents {gib(self.latent)}, transformer activations "
                f"{gib(self.activations)}, decoded video {gib(self.video)})")


def estimate(model_config: Any, latent_shape: tuple[int, int, int, int], pixel_shape: tuple[int, int, int, int], *,
             batch: int, dtype: torch.dtype, token_shards: int = 1) -> MemoryEstimate:
    """Peak bytes of sampling ``latent_shape`` (C', T', H', W') and decoding ``pixel_shape`` (C, T, H, W).

    ``batch``: samples per model call (2 when both guidance branches run together);
    ``token_shards``: context-parallel ranks sharing the tokens (activations only)."""
    c, t, h, w = latent_shape
    pt, ph, pw = model_config.patch
    tokens = -(-(t // pt) * (h // ph) * (w // pw) // token_shards)
    width = getattr(model_config, "hidden", 0) * (BLOCK_ACTIVATIONS + float(getattr(model_config, "mlp_ratio", 4.0)))
    activations = int(batch * tokens * width * torch.finfo(dtype).bits // 8)
    latent = LATENT_COPIES * c * t * h * w * 4
    pc, pt_, ph_, pw_ = pixel_shape
    return MemoryEstimate(latent, activations, VIDEO_COPIES * pc * pt_ * ph_ * pw_ * 4)


def available(device: torch.device) -> tuple[int, str]:
    """(free bytes, what they are) on ``device``: the GPU's free memory, or the host's available RAM."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free, f"{device} has {gib(free)} free"
    try:  # Linux: MemAvailable counts reclaimable caches, as the allocator will find them
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) * 1024
                return free, f"the host has {gib(free)} available"
    except OSError:
        pass
    import os

    free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return free, f"the host has {gib(free)} available"
