"""megatron-core's parallel linears behind the ``nn.Linear`` interface of the family models.

Importing this module imports megatron-core (only :mod:`.strategy` does, inside ``apply``).
Megatron's linears take sequence-first ``(S, B, D)`` input and return ``(output, bias)``; the
subclasses here take the models' ``(B, S, D)`` (or any ``(..., D)`` without SP), return the output
alone with the bias added, and keep the parameter names ``weight``/``bias``. Weights are copied
shard-wise from the original ``nn.Linear`` (no megatron initialisation), so a TP model starts from
exactly the single-process weights.
"""

from __future__ import annotations

import warnings

import torch
import torch.distributed as dist
from torch import nn

with warnings.catch_warnings():  # without TE/Apex megatron warns that it uses its torch fallbacks
    warnings.filterwarnings("ignore", message=".*Transformer Engine and Apex are not installed.*")
    from megatron.core import parallel_state
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.tensor_parallel import (ColumnParallelLinear, RowParallelLinear,
                                               set_tensor_model_parallel_attributes)

__all__ = ["ColumnLinear", "RowLinear", "SequenceSlot", "config_for", "full_grad", "parallel_state"]


class SequenceSlot:
    """The sequence-sharded input of one TP region while it runs (megatron-sp): a column linear fed
    exactly this tensor lets megatron all-gather the sequence; one fed anything else (the text of a
    cross-attention) takes its input as replicated."""

    tensor: torch.Tensor | None = None


def config_for(linear: nn.Linear, tp: int, sequence_parallel: bool) -> ModelParallelConfig:
    # use_cpu_initialization: build the shards on the CPU (no CUDA RNG tracker); no megatron init,
    # the weights are copied from the original linear below.
    return ModelParallelConfig(tensor_model_parallel_size=tp, sequence_parallel=sequence_parallel,
                               use_cpu_initialization=True, perform_initialization=False,
                               params_dtype=linear.weight.dtype)


def _no_init(weight: torch.Tensor) -> None:
    """Megatron's ``init_method``; unused (perform_initialization=False)."""


def _seq_first(x: torch.Tensor) -> torch.Tensor:
    """(B, S, D) -> (S, B, D); any other rank -> (N, 1, D) (megatron's wgrad wants 3-D input)."""
    if x.dim() == 3:
        return x.transpose(0, 1).contiguous()
    return x.reshape(-1, 1, x.shape[-1])


def _batch_first(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Undo :func:`_seq_first` on an output ``y`` (its sequence length may differ from ``x``'s)."""
    if x.dim() == 3:
        return y.transpose(0, 1)
    return y.reshape(*x.shape[:-1], y.shape[-1])


def _mark(param: torch.Tensor | None, group, partition_dim: int) -> None:
    """Tag a shard as megatron does (its CPU init sets these only with perform_initialization)."""
    if param is not None:
        if not getattr(param, "tensor_model_parallel", False):
            set_tensor_model_parallel_attributes(param, True, partition_dim, 1)
        param._vfm_tp_group = group  # for full_grad: megatron records partition_dim, not the group


class ColumnLinear(ColumnParallelLinear):
    """``linear`` split by output features over ``group``: y[..., shard] = x @ W[shard].T + b[shard]."""

    def __init__(self, linear: nn.Linear, config: ModelParallelConfig, group, slot: SequenceSlot | None = None):
        super().__init__(linear.in_features, linear.out_features, config=config, init_method=_no_init,
                         bias=linear.bias is not None, gather_output=False, skip_bias_add=False, tp_group=group)
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        with torch.no_grad():
            self.weight.copy_(linear.weight.chunk(world, dim=0)[rank])  # (out/tp, in)
            if self.bias is not None:
                self.bias.copy_(linear.bias.chunk(world, dim=0)[rank])
        self.to(linear.weight.device)
        self.slot = slot
        _mark(self.weight, group, 0)
        _mark(self.bias, group, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, S[/tp], D_in) -> (B, S, D_out/tp)
        if self.slot is not None:
            # Megatron decides per layer; here per call: gather the sequence (and reduce-scatter its
            # gradient) only for the region's sharded input, else all-reduce the input gradient.
            sharded = x is self.slot.tensor
            if sharded and x.dim() != 3:
                raise ValueError(f"megatron-sp needs (B, S, D) tokens; got shape {tuple(x.shape)}")
            self.sequence_parallel, self.allreduce_dgrad = sharded, not sharded
        out, _ = super().forward(_seq_first(x))
        return _batch_first(out, x)


class RowLinear(RowParallelLinear):
    """``linear`` split by input features over ``group``: partial products summed (all-reduce) or,
    with sequence parallelism, reduce-scattered over the sequence; the bias is added once after."""

    def __init__(self, linear: nn.Linear, config: ModelParallelConfig, group):
        super().__init__(linear.in_features, linear.out_features, config=config, init_method=_no_init,
                         bias=linear.bias is not None, input_is_parallel=True, skip_bias_add=False, tp_group=group)
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        with torch.no_grad():
            self.weight.copy_(linear.weight.chunk(world, dim=1)[rank])  # (out, in/tp)
            if self.bias is not None:
                self.bias.copy_(linear.bias)  # replicated
        self.to(linear.weight.device)
        _mark(self.weight, group, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, S, D_in/tp) -> (B, S[/tp], D_out)
        if self.sequence_parallel and x.dim() != 3:
            raise ValueError(f"megatron-sp needs (B, S, D) tokens; got shape {tuple(x.shape)}")
        out, _ = super().forward(_seq_first(x))
        return _batch_first(out, x)


def full_grad(param: torch.Tensor) -> torch.Tensor | None:
    """The whole gradient of ``param``: a megatron shard's gradient all-gathered along its
    ``partition_dim`` over its TP group; any other parameter's gradient as it is."""
    grad = param.grad
    group = getattr(param, "_vfm_tp_group", None)
    if grad is None or group is None:
        return grad
    parts = [torch.empty_like(grad) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, grad.contiguous(), group=group)
    return torch.cat(parts, dim=param.partition_dim)
