"""The trainer's random draws per micro-batch, following seed table 3 and independent of the layout.

Table 3: the timestep differs across data-parallel ranks and is the same across CP/PP/TP; the
Gaussian noise differs across DP *and* CP and is the same across PP/TP. The trainer keys both
streams by (seed, stream, step, global micro-batch index) and the noise also by the CP coordinate.
The global micro-batch index (``micro * dp_size + dp_rank``) is what makes a DP rank differ; keying
by it rather than by the mesh coordinate means a sample gets the same timestep and noise in every
layout with the same global batch (one process with grad_accum 4 draws what 4 DP ranks draw), so
the single-process run is the reference for the parallel ones, and a resumed run needs no saved
generator state: the draws are a pure function of the step.
"""

from __future__ import annotations

import hashlib

import torch

STREAMS = ("timestep", "noise")


def derive_seed(seed: int, stream: str, *coords: int) -> int:
    """A 63-bit seed from (seed, stream, coords...), stable across Python runs and platforms."""
    text = ":".join([str(seed), stream, *map(str, coords)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") & (2**63 - 1)


def micro_batch_generators(
    seed: int, step: int, global_micro: int, cp_rank: int, device: torch.device | str = "cpu"
) -> tuple[torch.Generator, torch.Generator]:
    """(timestep generator, noise generator) for one micro-batch of one optimizer step."""
    timestep = torch.Generator(device=device).manual_seed(derive_seed(seed, "timestep", step, global_micro))
    noise = torch.Generator(device=device).manual_seed(derive_seed(seed, "noise", step, global_micro, cp_rank))
    return timestep, noise
