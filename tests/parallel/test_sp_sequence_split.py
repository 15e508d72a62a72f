"""Sequence parallelism keeps S/tp tokens per rank, so a sequence tp does not divide is refused when the
model is parallelized (``parallelize(..., tokens=S)``, ``check_strategies(..., tokens=S)``), on every rank
of a real gloo group, naming the numbers and what is accepted. It used to pass there and fail inside the
first forward on every rank (``sequence length 9 is not divisible by the 2 ranks sharding it``, one
traceback per rank), e.g. a ``vfm train`` bucket of 9 tokens under tp 2 with ``sp``."""

from __future__ import annotations

import pytest
import torch

from tests.gloo import spawn
from tests.parallel.toy_model import ToyDiT
from vfm_parallel import LayoutError, ParallelDims, parallelize
from vfm_parallel.parallel_model import check_strategies

SIZES = {9: (6, 6), 10: (4, 10)}  # (H, W) whose 2x2 patches are that many tokens
REFUSAL = ("sp splits each sequence over tp = 2 ranks, but a sequence of 9 tokens does not divide by 2; accepted: "
           "tp 1, 3, 9 (dividing 9), or the strategy tp instead of sp (every rank keeps the whole sequence)")


def _parallelize_with(rank, world, strategy, tokens):
    """The error ``parallelize`` raises on this rank (None if none), and, when it accepts, a forward."""
    torch.manual_seed(0)
    try:
        pm = parallelize(ToyDiT(), ParallelDims(tp=2), [strategy], tokens=tokens)
    except LayoutError as exc:
        return str(exc)
    x = torch.randn(1, 4, 1, *SIZES[tokens])  # (B, C, T, H, W)
    return tuple(pm.model(x, torch.rand(1), {"y": torch.tensor([1])}).shape)


def test_sp_refuses_a_sequence_tp_does_not_divide_on_every_rank_before_any_forward():
    assert spawn(_parallelize_with, 2, "sp", 9) == [REFUSAL, REFUSAL]


def test_sp_takes_a_sequence_tp_divides_and_tp_takes_any():
    assert spawn(_parallelize_with, 2, "sp", 10) == [(1, 4, 1, 4, 10)] * 2
    assert spawn(_parallelize_with, 2, "tp", 9) == [(1, 4, 1, 6, 6)] * 2


@pytest.mark.parametrize("strategy, whole", [("sp", "tp"), ("megatron-sp", "megatron-tp")])
def test_check_strategies_refuses_it_without_a_process_group(strategy, whole):
    plan = ToyDiT().parallel_plan()
    with pytest.raises(LayoutError) as error:
        check_strategies(ParallelDims(tp=2), [strategy], plan, tokens=9, hardware=[])
    assert str(error.value) == (f"{strategy} splits each sequence over tp = 2 ranks, but a sequence of 9 tokens does "
                                f"not divide by 2; accepted: tp 1, 3, 9 (dividing 9), or the strategy {whole} instead of "
                                f"{strategy} (every rank keeps the whole sequence)")
    check_strategies(ParallelDims(tp=2), [strategy], plan, tokens=10, hardware=[])


def test_a_strategy_without_check_tokens_takes_any_sequence():
    # check_tokens is optional (plugins written before it keep working): fsdp defines none
    assert [s.name for s in check_strategies(ParallelDims(dp_shard=2), ["fsdp"], ToyDiT().parallel_plan(), tokens=9)] == ["fsdp"]
