"""What the trainer is given and what it returns: the injected parts (model, formulation, loader,
FLOPs, export), this rank's context, and the run's result. vfm-parallel never imports vfm-models or
vfm-data; ``vfm_cli.recipe`` builds the parts from a config."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import torch
from torch import nn

from vfm_parallel.trainer import batches as batches_mod
from vfm_parallel.trainer.config import TrainConfig
from vfm_parallel.trainer.distributed import Coordinates


class Formulation(Protocol):
    # ``noise``: an explicit noise tensor instead of noise_generator (chunked noise under CP)
    def loss(self, model: nn.Module, x0: torch.Tensor, cond: dict, generator: torch.Generator,
             noise_generator: torch.Generator | None = None, *, noise: torch.Tensor | None = None) -> torch.Tensor: ...

    # packed micro-batches only (docs/contracts.md section 2)
    def loss_packed(self, model: nn.Module, x0s: list, cond: dict, generator: torch.Generator, noise_generator: torch.Generator | None = None) -> torch.Tensor: ...


class ResumableLoader(Protocol):
    def __iter__(self): ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def sample_keys(batch: dict[str, Any]) -> list[str]:
    """The sample keys a micro-batch carries (``keys``, as vfm-data names them), else none."""
    keys = batch.get("keys", batch.get("__key__"))
    return [str(k) for k in keys] if isinstance(keys, (list, tuple)) else []


def count_samples(batch: dict[str, Any]) -> int:
    """The default count when the parts give none: ``num_tokens`` if the batch has it, else samples."""
    if "num_tokens" in batch:
        return int(batch["num_tokens"])
    return len(batch["x0s"]) if "x0s" in batch else batch["x0"].shape[0]


@dataclass
class TrainParts:
    """What the trainer is given: built on every rank after seeding, before parallelization."""

    model: nn.Module  # the whole model, identically initialised on every rank
    formulation: Formulation
    loader: ResumableLoader  # micro-batches of this DP rank, dense or packed (see trainer.batches)
    flops_per_token: float  # training FLOPs (fwd + bwd) per token by the seeds' convention, 6 N + 12 L h S
    #: the matmul FLOPs (fwd + bwd) per token the step really executes (vfm_models.flops.flops_per_token):
    #: adaLN and embedder linears once per sample, text keys/values once per text token
    executed_flops_per_token: float | None = None
    count_tokens: Callable[[dict[str, Any]], int] = count_samples  # tokens in one micro-batch
    seq_len: int | None = None  # tokens per sample, for the layout check (tokens % cp)
    patch: tuple[int, int, int] | None = None  # (pt, ph, pw): needed to draw the noise per CP shard
    export: Callable[[Path, dict[str, torch.Tensor]], None] | None = None  # (folder, full weights)
    #: the export's config.json (JSON: family, config, tokenizer, ...), recorded in every checkpoint's state.json
    #: under "export", so that a checkpoint alone makes an export (``vfm export CHECKPOINT``), shards or not
    export_meta: dict[str, Any] | None = None
    null_cond: batches_mod.NullCond | None = None  # condition dropout's substitute (None: unconditional)
    #: the held-out clips of ``[validation]``, each ``{"x0": (C, T, H, W), "cond": {key: (1, ...)}}``, in a fixed
    #: order, the same on every rank (called once, when validation.interval > 0)
    held_out: Callable[[], list[dict[str, Any]]] | None = None
    #: ``preview(folder, full weights, step)``: rank 0 writes ``[preview]``'s videos of those weights into folder
    preview: Callable[[Path, dict[str, torch.Tensor], int], Any] | None = None


@dataclass(frozen=True)
class RunContext:
    """Handed to the parts builder: where this rank sits and what it runs on."""

    coords: Coordinates
    device: torch.device
    config: TrainConfig
    # the gloo group of this rank's pp x cp x tp peers that the loader shares batches over under
    # data.subset_loading (distributed.data_share_group), or None. The trainer makes it before the
    # parts: making a group is collective, and building the parts must not be (a rank whose build
    # failed alone would leave its peers waiting in the group's making instead of in the agreement)
    data_group: Any = None


@dataclass
class TrainResult:
    losses: dict[int, float] = field(default_factory=dict)  # step -> loss (all steps run in this call)
    last_metrics: dict[str, float] = field(default_factory=dict)
    mean_tokens_per_s: float = 0.0
    mean_mfu: float = 0.0  # the seeds' convention (6 N + 12 L h S), comparable with published tables
    mean_mfu_executed: float = 0.0  # the FLOPs the device really executed
    peak_tflops: float = 0.0
    peak_source: str = ""
    start_step: int = 0
    final_step: int = 0
    checkpoint: Path | None = None
    export: Path | None = None
    loss_curve: Path | None = None
    model: nn.Module | None = None
