"""What a run writes: its checkpoints (with each data-parallel rank's loader position) and the full,
unsharded weights the inference export is made from."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import torch
import torch.distributed as dist

from vfm_parallel import checkpoint as ckpt
from vfm_parallel.trainer.config import TrainConfig
from vfm_parallel.trainer.distributed import Coordinates
from vfm_parallel.trainer.ema import clean_fqn
from vfm_parallel.trainer.parts import TrainParts


def full_weights(named: Iterable[tuple[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Unsharded CPU copies (collective under FSDP/TP: every rank must call it)."""
    out = {}
    for name, t in named:
        t = t.full_tensor() if hasattr(t, "full_tensor") else t
        out[clean_fqn(name)] = t.detach().to("cpu", copy=True)
    return out


def merge_stages(weights: dict[str, torch.Tensor], group: Any) -> dict[str, torch.Tensor]:
    """Every pipeline stage's weights (single-process names) in one dict, on every stage."""
    parts: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(parts, weights, group=group)
    return {k: v for part in parts for k, v in part.items()}


def _first_of_dp_group(coords: Coordinates) -> bool:
    return all(coords.index[n] == 0 for n in ("pp", "cp", "tp"))


def save_checkpoint(cfg: TrainConfig, root: Path, step: int, model, optimizer, ema, parts: TrainParts, coords: Coordinates) -> Path:
    loader_state = parts.loader.state_dict()  # every rank: collective where the DP rank's peers share reads
    return ckpt.save(
        root, step, model=model, optimizer=optimizer, ema=ema,
        state={"world_size": coords.world_size, "sizes": coords.sizes, "config": cfg.to_dict(),
               **({"export": parts.export_meta} if parts.export_meta is not None else {})},
        # One file per DP rank: its TP/CP/PP peers read the same samples and would write the same file.
        rank_state={"loader": loader_state} if _first_of_dp_group(coords) else None,
        rank_key=coords.dp_rank, keep=cfg.checkpoint.keep,
    )
