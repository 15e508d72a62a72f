"""vfm plan's activation checkpointing: none, full, the fewest checkpointed blocks per stage that fit
(Megatron's block method, ``parallel.checkpoint_blocks``) and vfm's selective mode, in memory and
step time; and the blocks it writes are ones vfm's trainer accepts."""

from __future__ import annotations

import dataclasses
import tomllib

import pytest

from vfm_parallel.planner import Layout, ModelSpec, load_profile, memory, parallel_block, plan, predict
from vfm_parallel.planner.memory import least_checkpointing
from vfm_parallel.trainer.config import from_dict

DIT_7B = dict(name="dit-cross-7B", params=6_876_691_520, layers=32, hidden=3072, heads=24)
DIT_28B = dict(name="dit-cross-28B", params=27_264_910_400, layers=48, hidden=5120, heads=40)
#: 28B at 8k as the seeds' table A ran it: tp2 pp2, Megatron's distributed optimizer, 16 microbatches.
TP2_PP2 = Layout(tp=2, pp=2, dp_shard=64, distopt=True, micro_batch=16, pp_microbatches=16)


@pytest.fixture(scope="module")
def h100():
    return load_profile("h100")


def _mem(spec, layout, hw):
    return memory(spec, layout, ema=False, activation_overhead=hw.calibration.activation_overhead).total


def test_partial_checkpointing_is_the_fewest_blocks_of_a_stage_that_fit(h100):
    spec = ModelSpec(seq_len=8192, **DIT_28B)
    usable, stage = h100.usable_bytes, spec.layers // TP2_PP2.pp
    assert _mem(spec, TP2_PP2, h100) > usable  # no checkpointing: OOM
    partial = least_checkpointing(spec, dataclasses.replace(TP2_PP2, activation_checkpointing="full"), usable, ema=False,
                                  activation_overhead=h100.calibration.activation_overhead)
    n = partial.checkpoint_blocks
    assert 0 < n < stage
    assert _mem(spec, partial, h100) <= usable < _mem(spec, dataclasses.replace(partial, checkpoint_blocks=n - 1), h100)
    # each block checkpointed trades its activations for its input: memory falls block by block
    mems = [_mem(spec, dataclasses.replace(partial, checkpoint_blocks=k), h100) for k in range(1, stage + 1)]
    assert all(a > b for a, b in zip(mems, mems[1:]))
    # where no checkpointing fits, or where only full does, there is no partial variant
    assert least_checkpointing(spec, Layout(tp=8, dp_shard=32, activation_checkpointing="full"), usable) is None


def test_recompute_grows_in_proportion_to_the_checkpointed_blocks(h100):
    spec = ModelSpec(seq_len=8192, **DIT_28B)
    full = dataclasses.replace(TP2_PP2, activation_checkpointing="full")
    compute = {k: predict(spec, dataclasses.replace(full, checkpoint_blocks=k) if k else TP2_PP2, h100,
                          framework="megatron").time.compute for k in (0, 6, 12, 24)}
    extra = compute[24] - compute[0]
    assert extra == pytest.approx(compute[0] / 3)  # full recompute: one more forward, 1/3 of forward + backward
    assert compute[6] - compute[0] == pytest.approx(extra * 6 / 24)
    assert compute[12] - compute[0] == pytest.approx(extra * 12 / 24)
    rates = [predict(spec, dataclasses.replace(full, checkpoint_blocks=k), h100, framework="megatron").tokens_per_s_per_gpu
             for k in (6, 12, 24)]
    assert rates[0] > rates[1] > rates[2]


def test_selective_checkpointing_keeps_the_matmul_outputs_and_recomputes_no_matmul(h100):
    """dit-cross keeps 2 (input) + 2 x 13 (matmul and attention outputs) of its 54 bytes per token and
    hidden unit under selective checkpointing; its recompute is element-wise, far below full's 1/3."""
    spec = ModelSpec(seq_len=8192, **DIT_7B)
    base = Layout(dp_shard=64, micro_batch=2)
    none, sel, full = (predict(spec, dataclasses.replace(base, activation_checkpointing=ac), h100) for ac in (False, "selective", "full"))
    tokens, h = 2 * 8192, spec.hidden
    per_block = 54 * h * tokens
    assert (none.memory.activations - sel.memory.activations) == pytest.approx(
        h100.calibration.activation_overhead * (spec.layers * (54 - 28) * h * tokens - per_block))
    assert none.memory.total > sel.memory.total > full.memory.total
    assert none.time.compute < sel.time.compute < none.time.compute * 1.05 < full.time.compute
    # TP splits the kept column-parallel outputs but not the row-parallel ones (partial sums, full width)
    tp2 = predict(spec, Layout(tp=2, dp_shard=32, micro_batch=2, activation_checkpointing="selective"), h100)
    tp2_none = predict(spec, Layout(tp=2, dp_shard=32, micro_batch=2), h100)
    assert (tp2_none.memory.activations - tp2.memory.activations) == pytest.approx(
        h100.calibration.activation_overhead * (spec.layers * (54 - 2 - 2 * (10 + 3 * 2)) * h * tokens / 2 - per_block / 2))


def test_a_plan_offers_partial_and_selective_checkpointing_and_vfm_train_accepts_their_blocks(h100):
    spec = ModelSpec(seq_len=8192, **DIT_7B)
    result = plan(spec, 64, h100, global_batch=128)
    partial = [p for p in result.ranked if p.layout.checkpoint_blocks]
    selective = [p for p in result.ranked if p.layout.activation_checkpointing == "selective"]
    assert partial and selective
    for p in partial[:5] + selective[:5]:
        block = tomllib.loads(parallel_block(p))["parallel"]
        cfg = from_dict({"parallel": block, "data": {"source": "synthetic", "micro_batch": p.layout.micro_batch},
                         "optim": {"grad_accum": p.layout.grad_accum}}, 64)
        assert cfg.parallel.checkpointing() == {"mode": p.layout.activation_checkpointing,
                                                "blocks": p.layout.checkpoint_blocks}
        assert "ac" in cfg.parallel.strategies and p.layout.checkpoint_blocks < spec.layers // p.layout.pp
    # Megatron's selective recompute (core attention) is not planned: it keeps about what none keeps
    mega = plan(ModelSpec(seq_len=8192, **DIT_28B), 256, h100, global_batch=1024, framework="megatron")
    assert not [p for p in mega.ranked + mega.others if p.layout.activation_checkpointing == "selective"]
    assert any(p.layout.checkpoint_blocks for p in mega.ranked)
