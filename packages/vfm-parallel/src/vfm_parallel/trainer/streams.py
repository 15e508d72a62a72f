"""The trainer's random draws per micro-batch: seed table 3 via :mod:`vfm_parallel.rng`, layout-free.

:mod:`vfm_parallel.rng` makes the timestep stream differ across DP coordinates only and the noise
stream across DP and CP. The trainer hands it, as the data-parallel coordinate, the *global
micro-batch index* (``micro * dp_size + dp_rank``) and folds the step into the seed. A sample then
gets the same timestep and noise in every layout with the same global batch (one process with
grad_accum 4 draws what 4 DP ranks draw), so the single-process run is the reference for the
parallel ones, and a resumed run needs no saved generator state: the draws are a pure function of
the step.

Noise under context parallelism (table 3: different across CP ranks) must still leave the model's
input identical on every CP rank, because CP shards the sequence only *after* ``model.embed``. So
the noise is drawn in token space in ``chunks`` contiguous pieces of the t-major patch sequence,
piece j from the noise stream at cp coordinate j (exactly the shard CP rank j holds); every rank
draws all pieces and assembles the same tensor. One process with ``chunks = cp`` draws the same.
"""

from __future__ import annotations

from typing import Sequence

import torch

from vfm_parallel import rng
from vfm_parallel.trainer.batches import unpatchify


def _step_seed(seed: int, step: int) -> int:
    return seed * 2**32 + step  # distinct per (seed, step) for any run shorter than 2^32 steps


def micro_batch_generators(
    seed: int, step: int, global_micro: int, cp_rank: int, device: torch.device | str = "cpu"
) -> tuple[torch.Generator, torch.Generator]:
    """(timestep generator, noise generator) for one micro-batch of one optimizer step."""
    coords = {"dp_shard": global_micro, "cp": cp_rank}
    return (
        rng.generator("timestep", seed=_step_seed(seed, step), device=device, coords=coords),
        rng.generator("noise", seed=_step_seed(seed, step), device=device, coords=coords),
    )


def cond_dropout_generator(seed: int, step: int, global_micro: int, device: torch.device | str = "cpu") -> torch.Generator:
    """The condition-dropout draws of one micro-batch: the ``cond_dropout`` stream, which (like the
    timestep) differs across DP only, so the CP, TP and PP ranks that share a sample drop it alike,
    and a resumed run drops the same samples (a pure function of the step)."""
    return rng.generator("cond_dropout", seed=_step_seed(seed, step), device=device, coords={"dp_shard": global_micro})


def noise_generators(seed: int, step: int, global_micro: int, chunks: int,
                     device: torch.device | str = "cpu") -> list[torch.Generator]:
    """The noise stream at cp coordinates 0 .. chunks-1 for one micro-batch of one step."""
    return [micro_batch_generators(seed, step, global_micro, j, device)[1] for j in range(chunks)]


def sharded_noise(shape: Sequence[int], patch: Sequence[int], generators: Sequence[torch.Generator],
                  device: torch.device | str = "cpu") -> torch.Tensor:
    """Gaussian noise of latent ``shape`` (B, C, T, H, W), float32, whose j-th contiguous chunk of
    patch tokens (t-major, ``len(generators)`` chunks) is drawn by ``generators[j]``."""
    b, c, t, h, w = (int(s) for s in shape)
    pt, ph, pw = (int(p) for p in patch)
    if t % pt or h % ph or w % pw:
        raise ValueError(f"latent (T, H, W) = {(t, h, w)} is not divisible by the patch {(pt, ph, pw)}")
    grid = (t // pt, h // ph, w // pw)
    tokens, chunks = grid[0] * grid[1] * grid[2], len(generators)
    if tokens % chunks:
        raise ValueError(f"{tokens} patch tokens (grid {grid}) do not split into {chunks} equal noise chunks "
                         f"(one per CP rank); use a token count divisible by {chunks}")
    width = c * pt * ph * pw
    pieces = [torch.randn((b, tokens // chunks, width), generator=g, device=device, dtype=torch.float32)
              for g in generators]  # piece j: (B, S/chunks, C*pt*ph*pw)
    seq = torch.cat(pieces, dim=1)  # (B, S, C*pt*ph*pw)
    return torch.stack([unpatchify(sample, grid, c, patch) for sample in seq])  # (B, C, T, H, W)


def draws(cfg: "TrainConfig", step: int, global_micro: int, batch: dict[str, Any], patch, device: torch.device):
    """(timestep generator, noise generator or None, noise tensor or None) of one micro-batch.

    With one noise chunk the formulation draws the noise from the stream at cp = 0. With cp
    chunks every CP rank assembles the same full noise, chunk j from the stream at cp = j, so the
    model's input agrees on all CP ranks (CP shards only after ``model.embed``) while each rank's
    shard of the sequence has noise from its own CP stream (seed table 3).
    """
    chunks = cfg.noise_chunks()
    gen_t, gen_n = micro_batch_generators(cfg.train.seed, step, global_micro, 0, device)
    if chunks == 1:
        return gen_t, gen_n, None
    gens = noise_generators(cfg.train.seed, step, global_micro, chunks, device)
    return gen_t, None, sharded_noise(batch["x0"].shape, patch, gens, device)
