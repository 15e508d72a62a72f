"""Every dataset's latent shape against the model's shape rules, before any process group starts.

vfm-data's loader cuts a latent to whole patches and drops a sample longer than a pack, and says
little about it; a model trained on cropped latents exports a patch that ``vfm generate`` then
refuses for the shards' own latent size. So the shapes the loader will see are checked here, one
line naming the dataset folder, the latent shape, the rule and what would be accepted.

The shapes are those of each dataset's first sample (:class:`~vfm_cli.recipe.shards.ShardInfo`):
``vfm shard`` writes one folder per bucket (one pixel size and frame count, so one latent shape),
which is also how the bucketed loader groups samples (by latent (T, H, W)).
"""

from __future__ import annotations

import math
from typing import Any

from vfm_parallel.dims import divisors
from vfm_parallel.trainer.config import ConfigError, TrainConfig
from vfm_plugins.text import counted

from vfm_cli.recipe.resolution import Resolved

Shape = tuple[int, int, int, int]


def data_shapes(cfg: TrainConfig, r: Resolved) -> list[tuple[str, Shape]]:
    """(where, latent (C, T, H, W)) of each dataset, with T cut to its frames bucket as the bucketed
    loader cuts it; ``where`` is the dataset folder, or ``data.latent_shape`` without shards at hand."""
    if cfg.data.source == "synthetic" or r.shards is None:
        return [("data.latent_shape", tuple(r.latent_shape))]
    shapes = [(str(folder), tuple(shape)) for folder, shape in zip(r.shards.datasets, r.shards.shapes)]
    if cfg.data.packing:  # packs take whole samples: no frames bucket
        return shapes
    durations = sorted(int(d) for d in cfg.data.durations)
    if not durations:  # the loader's default: the frame counts of the shards themselves
        return shapes
    out = []
    for where, (c, t, h, w) in shapes:
        fitting = [d for d in durations if d <= t]
        if not fitting:
            raise ConfigError("data.durations", f"{where}: latents of {counted(t, 'frame')} are shorter than every duration "
                                                f"{durations}; accepted: durations of at most {counted(t, 'latent frame')}")
        out.append((where, (c, max(fitting), h, w)))
    return out


def check_data_shapes(cfg: TrainConfig, r: Resolved) -> None:
    """Refuse a dataset the model cannot take whole: a latent (T, H, W) the patch does not divide
    (or smaller than one patch), more than one latent frame for the 2-D sin-cos table, or, when
    packing, a sample of more tokens than ``data.max_seq_len``."""
    shapes = data_shapes(cfg, r)
    patch = tuple(int(p) for p in r.mcfg.patch)
    for where, shape in shapes:
        _check_patch(cfg, where, shape, patch, shapes)
    grids = [(where, shape, _grid(shape, patch)) for where, shape in shapes]
    if getattr(r.mcfg, "pos_embed", "") == "sincos2d":
        for where, shape, grid in grids:
            if grid[0] > 1:
                raise ConfigError("model.options.pos_embed", f"{where}: latent (C, T, H, W) = {shape} is {grid[0]} latent frames "
                                  f"with the patch {list(patch)}, but the 2-D sin-cos table (pos_embed 'sincos2d') takes one; "
                                  f"accepted: pos_embed 'sincos' or 'rope' for video, or image shards")
    if cfg.data.source == "shards" and cfg.data.packing:
        longest = max(math.prod(grid) for _, _, grid in grids)
        for where, shape, grid in grids:
            tokens = math.prod(grid)
            if tokens > cfg.data.max_seq_len:
                raise ConfigError("data.max_seq_len", f"{where}: one sample is {tokens} tokens (latent (C, T, H, W) = {shape}, "
                                  f"patch {list(patch)}) but a pack holds {cfg.data.max_seq_len}, so the loader would drop "
                                  f"every sample of it; accepted: data.max_seq_len >= {longest}")


def _grid(shape: Shape, patch: tuple[int, int, int]) -> tuple[int, int, int]:
    return tuple(n // p for n, p in zip(shape[1:], patch))  # type: ignore[return-value]


def _check_patch(cfg: TrainConfig, where: str, shape: Shape, patch: tuple[int, int, int], shapes: list[tuple[str, Shape]]) -> None:
    _, t, h, w = shape
    pt, ph, pw = patch
    small = t < pt or h < ph or w < pw
    if not small and not (t % pt or h % ph or w % pw):
        return
    key = "data.latent_shape" if where == "data.latent_shape" else "model.options.patch"
    problem = "is smaller than one patch" if small else "is not divisible by the patch"
    cut = "" if small else " (the loader would crop it, and vfm generate refuses that latent size from the export)"
    raise ConfigError(key, f"{where}: latent (C, T, H, W) = {shape} {problem} {list(patch)}{cut}; accepted: "
                           f"{_accepted(cfg, patch, [s for _, s in shapes])}")


def _accepted(cfg: TrainConfig, patch: tuple[int, int, int], shapes: list[Shape]) -> str:
    """The patches every dataset's latent takes (the nearest at or below the configured one first)."""
    pt, ph, pw = patch
    ts = divisors(math.gcd(*[s[1] for s in shapes]))
    if cfg.data.source == "shards":  # square patches only (the shard loader's rule)
        ps = divisors(math.gcd(*[n for s in shapes for n in s[2:]]))
        near = [max(d for d in ts if d <= pt), *[max(d for d in ps if d <= ph)] * 2]
        return f"a patch [pt, p, p] with pt in {ts} and p in {ps}, e.g. {near}"
    hs, ws = divisors(math.gcd(*[s[2] for s in shapes])), divisors(math.gcd(*[s[3] for s in shapes]))
    near = [max(d for d in ts if d <= pt), max(d for d in hs if d <= ph), max(d for d in ws if d <= pw)]
    return (f"a patch [pt, ph, pw] with pt in {ts}, ph in {hs}, pw in {ws} (e.g. {near}), "
            f"or a data.latent_shape the patch {list(patch)} divides")
