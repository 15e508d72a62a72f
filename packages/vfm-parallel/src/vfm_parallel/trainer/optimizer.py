"""The run's AdamW (torch's fused kernel where it applies) and the global gradient norm with clipping."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from vfm_parallel.trainer.config import OptimConfig


def adamw(params: list[torch.Tensor], o: OptimConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW over ``params`` with the ``optim`` section's settings (lr is set per step by the schedule)."""
    fused = _fused_adamw(device, o.fused)
    return torch.optim.AdamW(_by_mesh(params) if fused else params, lr=o.lr, betas=tuple(o.betas), eps=o.eps,
                             weight_decay=o.weight_decay, fused=fused or None)


def _fused_adamw(device: torch.device, mode: str = "auto") -> bool:
    """torch's fused AdamW kernel (``optim.fused``): "auto" on CUDA, "on" on any device; plain and
    sharded (DTensor: FSDP, TP) parameters alike, so no layout falls back to the per-step host sync
    of the non-fused skip check (:class:`~vfm_parallel.trainer.health.NonFiniteGuard`)."""
    return mode == "on" or (mode == "auto" and device.type == "cuda")


def _by_mesh(params: list[torch.Tensor]) -> list[dict]:
    """One param group per device mesh (plain tensors: None). The fused kernel runs once per group
    and refuses plain tensors and DTensors in one call (TP keeps some parameters replicated, plain);
    the groups share every setting, and checkpoints key the optimizer state by parameter name, so a
    run resumes whichever grouping saved it."""
    groups: dict = {}
    for p in params:
        groups.setdefault(getattr(p, "device_mesh", None), []).append(p)
    return [{"params": group} for group in groups.values()]


def is_fused(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer`` runs torch's fused kernel, which can skip a step on the device
    (its ``found_inf`` input, as GradScaler uses it)."""
    return bool(optimizer.defaults.get("fused"))


def clip_grad_norm(params: list[torch.Tensor], clip: float, stage_group: Any = None, replicated: frozenset = frozenset()) -> torch.Tensor:
    """Global L2 norm of all gradients (a device tensor: no host sync), then clip to ``clip``
    (0 = no clipping) as torch does.

    Under TP some parameters are DTensors (sharded) and others plain tensors (replicated, their
    gradients already reduced by ``sync_grads``); torch's clip_grad_norm_ cannot mix them, so the
    norm is taken per device mesh and combined. Under PP (``stage_group``) each stage holds its own
    parameters, whose squared norms are summed over the stages, and copies of the conditioning
    embedders (ids in ``replicated``), counted once.
    """
    groups: dict[Any, list[torch.Tensor]] = {}
    for p in params:
        if p.grad is not None:
            groups.setdefault((getattr(p.grad, "device_mesh", None), id(p) in replicated), []).append(p.grad)
    device = params[0].device if params else torch.device("cpu")
    local = torch.zeros((), dtype=torch.float64, device=device)  # this stage's own squared norm
    shared = torch.zeros((), dtype=torch.float64, device=device)  # the replicated embedders'
    for (_, is_replicated), grads in groups.items():
        # foreach=None: torch's fused per-device kernel where the device has one (CUDA), the same
        # per-tensor norms elsewhere; foreach=True refuses devices without it (meta, in the placement tests)
        norm = torch.nn.utils.get_total_norm(grads, 2.0, foreach=None)
        norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
        square = norm.to(device, torch.float64) ** 2
        if is_replicated:
            shared = shared + square
        else:
            local = local + square
    if stage_group is not None:
        dist.all_reduce(local, group=stage_group)
    total = (local + shared).sqrt()
    if clip > 0:
        coef = (clip / (total + 1e-6)).clamp(max=1.0)  # x * 1.0 == x: unclipped gradients stay bitwise
        for grads in groups.values():
            if hasattr(grads[0], "device_mesh"):  # DTensor gradients take a Python scalar (TP runs only)
                scale = float(coef)
                for g in grads:
                    g.mul_(scale)
            else:
                torch._foreach_mul_(grads, coef.to(grads[0].dtype))
    return total
