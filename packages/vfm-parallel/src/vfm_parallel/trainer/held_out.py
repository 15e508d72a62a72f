"""The held-out loss: the formulation's loss on fixed clips at fixed noise levels with fixed noise, so
that it is comparable from step to step and run to run (the training loss jumps with its random levels).

Levels: evenly spaced quantiles of the formulation's own training distribution (``sample_level``), so
they cover the levels the model trains on, for any formulation (a plugin's too), without a table per
formulation. Noise: one Gaussian draw per (clip, level), seeded by (seed, clip, level) and drawn on the
host, so it is the same on every device and in every layout. A forward is one clip at up to
``data.micro_batch`` of its levels; data-parallel ranks take clips in turn and the sums are all-reduced, so the loss of
a 2-rank run equals the single-process one (up to the order of a float64 sum).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from typing import Any, Iterator, Sequence

import torch
import torch.distributed as dist

from vfm_parallel.trainer.ema import EMA, clean_fqn

#: draws of the training level distribution whose quantiles are the fixed levels (deterministic, on the host)
LEVEL_DRAWS = 1 << 16


def fixed_levels(formulation: Any, count: int, seed: int = 0) -> torch.Tensor:
    """(count,) float32 levels, increasing: the (i + 0.5) / count quantiles of :data:`LEVEL_DRAWS` draws
    of the formulation's training levels (the nearest draw, so a discrete schedule such as DDPM's gets
    levels it trains on)."""
    drawn = formulation.sample_level(LEVEL_DRAWS, torch.Generator().manual_seed(seed), "cpu").to(torch.float64)
    q = (torch.arange(count, dtype=torch.float64) + 0.5) / count
    return torch.quantile(drawn, q, interpolation="nearest").to(torch.float32)


def noise_seed(seed: int, clip: int, level: int) -> int:
    """The 63-bit seed of the noise of ``clip`` at level index ``level``."""
    key = f"{seed}|validation|{clip}|{level}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "little") >> 1


def fixed_noise(shape: Sequence[int], seed: int, clip: int, levels: int) -> torch.Tensor:
    """(levels, *shape) float32 host noise of one clip, draw ``j`` seeded by (seed, clip, j)."""
    return torch.stack([torch.randn(tuple(shape), generator=torch.Generator().manual_seed(noise_seed(seed, clip, j)))
                        for j in range(levels)])


def _repeat(cond: dict, n: int) -> dict:
    """A one-sample condition as a batch of ``n`` copies (one per level)."""
    return {k: v.repeat(n, *([1] * (v.dim() - 1))) if isinstance(v, torch.Tensor) else v for k, v in cond.items()}


def clip_losses(formulation: Any, model: torch.nn.Module, x0: torch.Tensor, cond: dict, levels: torch.Tensor,
                noise: torch.Tensor) -> torch.Tensor:
    """(L,) the formulation's loss of one clip x0 (C, T, H, W) at each of ``levels`` (L,) with ``noise``
    (L, C, T, H, W): what ``formulation.loss`` computes per sample, with given levels instead of drawn ones."""
    y = x0.to(torch.float32).unsqueeze(0).expand(len(levels), *x0.shape)  # (L, C, T, H, W)
    x, net_x, t = formulation.network_inputs(y, levels, noise)
    out = model(net_x.to(x0.dtype), t, _repeat(cond, len(levels)))
    out = out[:, : x0.shape[0]].to(torch.float32)  # a learned-sigma output counts with its prediction half
    return formulation.error(out, x, y, levels, noise).flatten(1).mean(1)


def held_out_loss(formulation: Any, model: torch.nn.Module, clips: Sequence[dict], levels: torch.Tensor, seed: int,
                  dp_rank: int, dp_size: int, device: torch.device, batch: int | None = None) -> tuple[float, list[float]]:
    """(mean loss, mean loss per level) over ``clips`` (each ``{"x0": (C, T, H, W), "cond": {k: (1, ...)}}``),
    a clip's levels in forwards of at most ``batch`` (default: all at once; the trainer's micro-batch size,
    so a forward holds no more than a training one).

    Collective over the whole process group: clip ``i`` is run by data-parallel rank ``i % dp_size`` (its
    TP/CP/PP peers run it with it), every rank runs the same number of forwards (a rank past the end runs
    a clip again and drops it: FSDP gathers weights in each forward), and the per-level sums and the
    count are all-reduced (a clip's copies on its peers count in both, so the mean is unchanged)."""
    n, count = len(clips), len(levels)
    sums = torch.zeros(count + 1, dtype=torch.float64, device=device)  # per-level sums, then clips counted
    levels, step = levels.to(device), batch or count
    for r in range(math.ceil(n / dp_size)):
        i = r * dp_size + dp_rank
        clip = clips[i % n]
        x0, cond = clip["x0"].to(device), {k: v.to(device) for k, v in clip["cond"].items()}
        noise = fixed_noise(x0.shape, seed, i % n, count).to(device)
        losses = torch.cat([clip_losses(formulation, model, x0, cond, levels[j : j + step], noise[j : j + step])
                            for j in range(0, count, step)])
        if i < n:
            sums[:count] += losses.to(torch.float64)
            sums[count] += 1
    if dist.is_initialized():
        dist.all_reduce(sums)
    per_level = (sums[:count] / sums[count]).tolist()
    return sum(per_level) / count, per_level


@contextlib.contextmanager
def ema_weights(model: torch.nn.Module, ema: EMA) -> Iterator[None]:
    """The model holding the EMA weights inside the block, its own ones again after (exact copies).
    The weights and the shadow trade places a parameter at a time, so no second set of weights is held
    (a clone of them all would add a model's worth of memory). Each rank swaps its own shards (FSDP/TP:
    the shadow has the parameters' placements)."""
    pairs = [(p, ema.shadow[clean_fqn(name)]) for name, p in model.named_parameters()]
    _swap(pairs)
    try:
        yield
    finally:
        _swap(pairs)


@torch.no_grad()
def _swap(pairs: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> None:
    for p, shadow in pairs:
        held = p.detach().clone()
        p.copy_(shadow)
        shadow.copy_(held)


def evaluation_mode(model: torch.nn.Module) -> contextlib.AbstractContextManager:
    """No gradients and eval mode for the block; after it, the mode the model was in and its FSDP
    modules resharded (see :func:`reshard`)."""

    @contextlib.contextmanager
    def block() -> Iterator[None]:
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                yield
        finally:
            reshard(model)
            model.train(was_training)

    return block()


def reshard(model: torch.nn.Module) -> None:
    """Free the weights FSDP gathered for a forward without backward. FSDP keeps the root's and the last
    block's (reshard_after_forward False: training's backward needs them next) until a backward reshards
    them; the next training forward would run on those copies, the EMA weights of an EMA swap. Local: no
    communication."""
    from torch.distributed.fsdp import FSDPModule

    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()
