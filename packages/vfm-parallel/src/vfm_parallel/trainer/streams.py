"""The trainer's random draws per micro-batch: seed table 3 via :mod:`vfm_parallel.rng`, layout-free.

:mod:`vfm_parallel.rng` makes the timestep stream differ across DP coordinates only and the noise
stream across DP and CP. The trainer hands it, as the data-parallel coordinate, the *global
micro-batch index* (``micro * dp_size + dp_rank``) and folds the step into the seed. A sample then
gets the same timestep and noise in every layout with the same global batch (one process with
grad_accum 4 draws what 4 DP ranks draw), so the single-process run is the reference for the
parallel ones, and a resumed run needs no saved generator state: the draws are a pure function of
the step.
"""

from __future__ import annotations

import torch

from vfm_parallel import rng


def micro_batch_generators(
    seed: int, step: int, global_micro: int, cp_rank: int, device: torch.device | str = "cpu"
) -> tuple[torch.Generator, torch.Generator]:
    """(timestep generator, noise generator) for one micro-batch of one optimizer step."""
    step_seed = seed * 2**32 + step  # distinct per (seed, step) for any run shorter than 2^32 steps
    coords = {"dp_shard": global_micro, "cp": cp_rank}
    return (
        rng.generator("timestep", seed=step_seed, device=device, coords=coords),
        rng.generator("noise", seed=step_seed, device=device, coords=coords),
    )
