"""Bad layouts fail before any collective (no process group exists here: a collective would raise
a different error), with a message that names the numbers that disagree."""

from __future__ import annotations

import pytest
import torch.distributed as dist

from tests.parallel.toy_model import ToyDiT
from vfm_parallel import LayoutError, ParallelDims, get_strategy, parallelize
from vfm_parallel.strategy import PHASES, order_strategies


@pytest.fixture(autouse=True)
def no_process_group():
    assert not dist.is_initialized()


def test_product_not_equal_to_world_size_names_both_numbers():
    with pytest.raises(LayoutError, match=r"= 4 but the world size is 1"):
        parallelize(ToyDiT(), ParallelDims(dp_shard=2, tp=2), ["fsdp", "tp"])


@pytest.mark.parametrize(
    ("dims", "kwargs", "message"),
    [
        (ParallelDims(tp=3), {}, r"num_heads 4 is not divisible by tp 3"),
        (ParallelDims(tp=4), {"heads": 4, "kv_heads": 2}, r"num_kv_heads 2 is not divisible by tp 4"),
        (ParallelDims(pp=3), {}, r"num_layers 4 is not divisible by pp 3"),
    ],
)
def test_model_shape_mismatch_names_the_numbers(dims, kwargs, message):
    with pytest.raises(LayoutError, match=message):
        dims.validate(dims.world_size, ToyDiT(**kwargs).parallel_plan())


def test_tokens_not_divisible_by_cp_names_the_numbers():
    with pytest.raises(LayoutError, match=r"sequence length 10 tokens is not divisible by cp 4"):
        ParallelDims(cp=4).validate(4, tokens=10)


@pytest.mark.parametrize(
    ("dims", "world", "kwargs", "tokens", "accepted"),
    [
        (ParallelDims(tp=3), 3, {"heads": 4, "kv_heads": 2}, None, "accepted: tp 1, 2"),
        (ParallelDims(pp=8), 8, {}, None, "accepted: pp 1, 2, 4"),
        (ParallelDims(cp=4), 4, None, 18, "accepted: cp 1, 2, 3, 6, 9, 18"),
        (ParallelDims(cp=2, tp=2), 2, None, None,
         "accepted: sizes whose product is 2 (parallel.dp_shard = -1 fills what the others leave), "
         "or 4 processes (torchrun --nproc-per-node 4)"),
    ],
    ids=["tp", "pp", "cp", "world"],
)
def test_a_layout_that_does_not_fit_ends_with_the_accepted_values(dims, world, kwargs, tokens, accepted):
    with pytest.raises(LayoutError) as info:
        dims.validate(world, ToyDiT(**kwargs).parallel_plan() if kwargs is not None else None, tokens)
    assert str(info.value).endswith(accepted)


def test_every_problem_is_reported_at_once():
    with pytest.raises(LayoutError) as info:
        ParallelDims(pp=3, tp=3).validate(4, ToyDiT().parallel_plan())
    text = str(info.value)
    assert "world size is 4" in text and "num_heads 4" in text and "num_layers 4" in text


def test_non_positive_size_is_rejected():
    with pytest.raises(LayoutError, match="integer >= 1"):
        ParallelDims(tp=0)


def test_unknown_strategy_lists_available_names():
    with pytest.raises(KeyError, match=r"unknown strategy 'zero3'; available: .*fsdp.*tp"):
        get_strategy("zero3")


def test_two_strategies_in_one_phase_are_rejected():
    with pytest.raises(ValueError, match="'fsdp' and 'ddp' both act in phase 'dp'"):
        order_strategies([get_strategy("fsdp"), get_strategy("ddp")])


def test_strategies_are_applied_in_the_documented_phase_order():
    names = ["fsdp", "compile", "ac", "sp", "pp"]
    assert [s.phase for s in order_strategies([get_strategy(n) for n in names])] == [
        p for p in PHASES if p != "cp"
    ]


def test_dimension_without_a_strategy_is_an_error_before_any_collective(monkeypatch):
    # Pretend a 2-rank world so that only the missing-strategy check can fail.
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    with pytest.raises(LayoutError, match=r"tp=2 but no chosen strategy parallelizes over 'tp'"):
        parallelize(ToyDiT(), ParallelDims(tp=2), ["fsdp"])
