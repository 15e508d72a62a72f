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


def full_weights(named: Iterable[tuple[str, torch.Tensor]], *, keep: bool = True) -> dict[str, torch.Tensor]:
    """Unsharded CPU copies (collective under FSDP/TP: every rank must call it). ``keep=False``: this rank
    takes part in each gather and keeps nothing, each gathered tensor freed before the next one, so only
    the rank that writes the weights holds a full copy. That is what DCP's ``get_model_state_dict`` with
    ``StateDictOptions(full_state_dict=True, cpu_offload=True)`` does (torch 2.10 to 2.13: the full state
    on rank 0 only), written here because it takes a module and the EMA weights are a dict of tensors."""
    out = {}
    for name, t in named:
        full = t.full_tensor() if hasattr(t, "full_tensor") else t
        if keep:
            out[clean_fqn(name)] = full.detach().to("cpu", copy=True)
        del full
    return out


def merge_stages(weights: dict[str, torch.Tensor], group: Any, dst: int = 0) -> dict[str, torch.Tensor]:
    """Every pipeline stage's weights (single-process names) in one dict on global rank ``dst`` of ``group``;
    an empty dict on the other stages (collective over ``group``)."""
    mine = dist.get_rank() == dst
    parts: list[Any] | None = [None] * dist.get_world_size(group) if mine else None
    dist.gather_object(weights, parts, dst=dst, group=group)
    return {k: v for part in parts for k, v in part.items()} if parts is not None else {}


def in_writers_pipeline(coords: Coordinates) -> bool:
    """This rank is in rank 0's pipeline (every mesh coordinate but its stage is 0): the ranks whose stage weights
    rank 0 collects for the export and the previews, which it alone writes."""
    return all(i == 0 for name, i in coords.index.items() if name != "pp")


def _first_of_dp_group(coords: Coordinates) -> bool:
    return all(coords.index[n] == 0 for n in ("pp", "cp", "tp"))


def save_checkpoint(cfg: TrainConfig, root: Path, step: int, model, optimizer, ema, parts: TrainParts, coords: Coordinates) -> Path:
    loader_state = parts.loader.state_dict()  # every rank: collective where the DP rank's peers share reads
    return ckpt.save(
        root, step, model=model, optimizer=optimizer, ema=ema,
        state={"world_size": coords.world_size, "sizes": coords.sizes, "config": cfg.to_dict(),
               # the EMA's count of updates applied (its warm-up's t): the step less the skipped steps
               **({"ema_updates": ema.updates_applied()} if ema is not None else {}),
               **({"export": parts.export_meta} if parts.export_meta is not None else {})},
        # One file per DP rank: its TP/CP/PP peers read the same samples and would write the same file.
        rank_state={"loader": loader_state} if _first_of_dp_group(coords) else None,
        rank_key=coords.dp_rank, keep=cfg.checkpoint.keep,
    )
