"""What a run measures and shows while it trains, on its own schedule: the held-out loss
(``[validation]``, :mod:`vfm_parallel.trainer.held_out`) and preview videos (``[preview]``).

Both are due at the steps ``done`` that their interval divides, a function of the step alone, so a
resumed run goes on at the same steps. Their figures join the metrics row of that step (one row per
step), and their time is left out of the training throughput.
"""

from __future__ import annotations

import contextlib
import json
import time
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist
from vfm_plugins.files import replace_file
from vfm_plugins.folders import remove_leftover_folders, written_whole

from vfm_parallel.checkpoint_names import step_dir
from vfm_parallel.trainer.config import ConfigError, TrainConfig
from vfm_parallel.trainer.ema import EMA
from vfm_parallel.trainer.health import TrainingWarning
from vfm_parallel.trainer.held_out import ema_weights, evaluation_mode, fixed_levels, held_out_loss
from vfm_parallel.trainer.parts import TrainParts


class PreviewWarning(TrainingWarning):
    """A preview that failed: the run goes on without it."""


#: how long the other ranks wait for rank 0's preview: far longer than a training collective's timeout
#: (NCCL's default is 10 minutes), which a large model's videos can outlast
PREVIEW_WAIT = timedelta(hours=2)


def _due(interval: int, done: int) -> bool:
    return interval > 0 and done % interval == 0


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":  # the time measured is this work's, not the training kernels queued before it
        torch.cuda.synchronize(device)


class Watching:
    """The held-out loss and the previews of one run on this rank."""

    def __init__(self, cfg: TrainConfig, parts: TrainParts, out_dir: Path, rank: int, dp_rank: int, dp_size: int,
                 device: torch.device, autocast: Callable[[], Any]) -> None:
        self.cfg, self.parts, self.out_dir, self.rank, self.device = cfg, parts, out_dir, rank, device
        self.autocast = autocast
        self.dp_rank, self.dp_size = dp_rank, dp_size
        v = cfg.validation
        self.clips: list[dict] = []
        self.levels = torch.zeros(0)
        if v.interval:
            if parts.held_out is None:
                raise ConfigError("validation.interval", f"is {v.interval} but this run's parts have no held-out clips "
                                                         "(TrainParts.held_out); set validation.interval = 0")
            self.clips = list(parts.held_out())
            if not self.clips:
                raise ConfigError("validation", "the held-out split has no clips; accepted: validation.blend naming "
                                                "shards with a split part validation.split")
            self.levels = fixed_levels(parts.formulation, v.levels)
            if rank == 0:
                self._record_levels()
        if cfg.preview.interval and parts.preview is None:
            raise ConfigError("preview.interval", f"is {cfg.preview.interval} but this run's parts cannot generate "
                                                  "(TrainParts.preview); set preview.interval = 0")
        # the ranks wait for rank 0's preview in a barrier of their own (gloo: on the host, so no device
        # collective sits waiting on its timeout); created here, as every rank makes it (collective)
        self.preview_wait = None
        if cfg.preview.interval and dist.is_initialized() and dist.get_world_size() > 1:
            self.preview_wait = dist.new_group(backend="gloo", timeout=PREVIEW_WAIT)

    def _record_levels(self) -> None:
        """``RUN/validation.json``: what ``val_loss_level_<j>`` means (the level j) and what it is measured on."""
        v = self.cfg.validation
        record = {"levels": self.levels.tolist(), "clips": len(self.clips), "seed": v.seed, "split": v.split,
                  "blend": v.blend, "formulation": self.cfg.model.formulation}
        self.out_dir.mkdir(parents=True, exist_ok=True)
        replace_file(self.out_dir / "validation.json", json.dumps(record, indent=2) + "\n")  # a planted link is replaced

    def due(self, done: int) -> bool:
        return _due(self.cfg.validation.interval, done) or _due(self.cfg.preview.interval, done)

    def at(self, done: int, model: torch.nn.Module, named: torch.nn.Module, ema: EMA | None,
           export_weights: Callable[[], dict[str, torch.Tensor]]) -> tuple[dict[str, float], float]:
        """(figures for step ``done``'s row, seconds spent): on every rank, collective."""
        row: dict[str, float] = {}
        _synchronize(self.device)
        start = time.perf_counter()
        if _due(self.cfg.validation.interval, done):
            row.update(self._validate(model, named, ema))
            _synchronize(self.device)
            row["val_s"] = time.perf_counter() - start
        if _due(self.cfg.preview.interval, done):
            begin = time.perf_counter()
            weights = export_weights()  # collective (FSDP/TP gathers, PP merges the stages)
            if self.rank == 0:
                self._preview(done, weights)
            del weights  # rank 0's full copy: gone before training goes on
            self._wait_for_preview(done)
            row["preview_s"] = time.perf_counter() - begin
        return row, time.perf_counter() - start

    def _validate(self, model: torch.nn.Module, named: torch.nn.Module, ema: EMA | None) -> dict[str, float]:
        v = self.cfg.validation
        which = {"auto": "ema" if ema is not None else "model"}.get(v.weights, v.weights)
        out: dict[str, float] = {}
        for weights in (("ema", "model") if which == "both" else (which,)):
            swap = ema_weights(named, ema) if weights == "ema" else contextlib.nullcontext()
            with swap, evaluation_mode(model), self.autocast():  # the precision the step trains in
                mean, per_level = held_out_loss(self.parts.formulation, model, self.clips, self.levels, v.seed,
                                                self.dp_rank, self.dp_size, self.device, self.cfg.data.micro_batch)
            suffix = "_model" if which == "both" and weights == "model" else ""
            out[f"val_loss{suffix}"] = mean
            out.update({f"val_loss{suffix}_level_{j}": value for j, value in enumerate(per_level)})
        return out

    def _wait_for_preview(self, done: int) -> None:
        """Every rank: on from here together once rank 0's preview of step ``done`` is written."""
        if self.preview_wait is None:
            return
        try:
            dist.barrier(group=self.preview_wait)
        except RuntimeError as exc:  # gloo's timeout, or a peer gone
            raise RuntimeError(f"rank {self.rank}: rank 0's preview of step {done} did not end within {PREVIEW_WAIT} "
                               f"(or rank 0 left): {exc}; accepted: fewer or smaller previews (preview.count, steps, "
                               "size, frames) or a longer preview.interval") from exc

    def _preview(self, done: int, weights: dict[str, torch.Tensor]) -> None:
        """Rank 0: the videos of step ``done`` under RUN/previews/step_<N>/, written into a sibling folder
        and renamed there when whole (an attempt at the same step before a resume, killed half way, leaves
        no file of its own among them); a failure is one warning and leaves the folder as it was."""
        folder = step_dir(self.out_dir / "previews", done)
        try:
            remove_leftover_folders(folder)  # a killed attempt's (this run holds the run folder's lock)
            with written_whole(folder) as partial:
                self.parts.preview(partial, weights, done)
        except Exception as exc:  # noqa: BLE001 - a preview is for looking at: it never ends the training
            warnings.warn(f"step {done}: the preview failed ({type(exc).__name__}: {exc}); training goes on",
                          PreviewWarning, stacklevel=3)
        finally:
            if self.device.type == "cuda":  # the pipeline's freed blocks back to the device, not held in reserve
                torch.cuda.empty_cache()
