"""Pipeline parallelism with ``torch.distributed.pipelining`` (GPipe, 1F1B, interleaved 1F1B).

The model is cut between blocks: stage ``s`` keeps blocks ``[s*L/pp, (s+1)*L/pp)``, the first
stage keeps the patch embedding, the last the final layer. Conditioning embedders stay on *every*
stage: each stage computes the block context itself from ``(t, cond)`` (the trainer passes them as
keyword arguments to every stage) instead of receiving it, trading a little compute for
communication. They are broadcast from stage 0 at set-up (identical initialisation) and their
gradients are summed over the PP group in ``sync_grads`` (each stage holds its blocks' part).
"""

from __future__ import annotations

import types
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from vfm_parallel import comm_stats, grad_sync
from vfm_parallel._modules import blocks_of, submodule

SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b")


def _mse(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(output, target)


def conditioning_names(model: nn.Module, plan: Any) -> list[str]:
    """Parameter names of the conditioning embedders listed in ``plan.conditioning``."""
    return [f"{path}.{name}" for path in plan.conditioning for name, _ in submodule(model, path).named_parameters()]


def _stage_forward(self, inp: torch.Tensor, *, x: torch.Tensor, t: torch.Tensor, **cond: Any) -> torch.Tensor:
    """One stage: ``inp`` is the latent x on the first stage, else the previous stage's tokens."""
    info = self._vfm_stage
    if info["first"]:
        tokens, grid = self.embed(inp)
    else:
        with torch.no_grad():  # only the grid (T', H', W') is needed; the embedding is not trained here
            _, grid = self.embed(x)
        tokens = inp
    ctx = self.context(grid, t, cond)
    for block in info["blocks"]():
        tokens = block(tokens, ctx)
    return self.head(tokens, ctx) if info["last"] else tokens


class PipelineParallel:
    """``pp``: keep this rank's stage of the model. Options: ``schedule`` (``"gpipe"``, ``"1f1b"``),
    ``microbatches`` (>= pp for 1F1B), ``loss_fn(output, target)`` (default: mean squared error;
    it must average over the microbatch, the schedule averages over microbatches)."""

    name = "pp"
    phase = "pp"
    mesh_dims = ("pp",)

    def __init__(self) -> None:
        self.options: dict[str, Any] = {}

    def apply(self, model: nn.Module, mesh: Any, plan: Any, *, schedule: str = "1f1b", microbatches: int | None = None,
              loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = _mse) -> nn.Module:
        pp_mesh = mesh["pp"]
        stages, stage = pp_mesh.size(), pp_mesh.get_local_rank()
        if schedule not in SCHEDULES[:2]:
            raise ValueError(f"pipeline schedule must be one of {', '.join(SCHEDULES[:2])}; got {schedule!r}")
        microbatches = microbatches or stages
        if schedule == "1f1b" and microbatches < stages:
            raise ValueError(f"1f1b needs microbatches >= pp stages; got {microbatches} microbatches for pp {stages}")
        self.options = {"schedule": schedule, "microbatches": microbatches, "loss_fn": loss_fn}
        blocks = blocks_of(model, plan)
        per_stage, rem = divmod(len(blocks), stages)
        if rem:
            raise ValueError(f"num_layers {len(blocks)} is not divisible by pp {stages}")
        keep = nn.ModuleList(blocks[stage * per_stage : (stage + 1) * per_stage])
        parent_path, _, attr = plan.blocks.rpartition(".")
        setattr(submodule(model, parent_path) if parent_path else model, attr, keep)
        first, last = stage == 0, stage == stages - 1
        if not first:  # kept only to compute the grid; unregistered, so never trained or sharded here
            for path in plan.pre_blocks:
                object.__setattr__(model, path, model._modules.pop(path))
        if not last:
            for path in plan.post_blocks:
                setattr(model, path, None)
        model._vfm_stage = {"first": first, "last": last, "index": stage, "blocks": lambda: blocks_of(model, plan)}
        model._vfm_block_offset = stage * per_stage  # original index of this stage's block 0 (checkpoints)
        model.forward = types.MethodType(_stage_forward, model)

        group = pp_mesh.get_group()
        names = conditioning_names(model, plan)
        params = dict(model.named_parameters())
        with torch.no_grad():  # identical initialisation on every stage
            for name in names:
                comm_stats.record("broadcast", "pp.conditioning", comm_stats.tensor_bytes(params[name]))
                dist.broadcast(params[name].data, group=group, group_src=0)
        grad_sync.add(model, lambda m: grad_sync.all_reduce_grads(m, names, group, "pp.conditioning"))
        return model

    def finalize(self, pm: Any) -> None:
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

        pp_mesh = pm.mesh["pp"]
        device = torch.device(pm.device_type, torch.cuda.current_device()) if pm.device_type == "cuda" else torch.device(pm.device_type)
        stage = PipelineStage(pm.model, pp_mesh.get_local_rank(), pp_mesh.size(), device, group=pp_mesh.get_group())
        cls = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[self.options["schedule"]]
        pm.schedule = cls(stage, n_microbatches=self.options["microbatches"], loss_fn=self.options["loss_fn"])
        pm.stage_info = dict(pm.inner._vfm_stage)
