"""The planner refuses what vfm refuses: a layout with sequence parallelism whose tp does not divide the
sequence (SP keeps S/tp tokens per rank; ``vfm train`` refuses it before any rank starts), so the plan
never recommends a ``torchrun`` command that fails."""

from __future__ import annotations

from vfm_parallel.planner import Layout, ModelSpec
from vfm_parallel.planner.layouts import vfm_rejects

SPEC = ModelSpec(name="odd-seq", params=100_000_000, layers=8, hidden=512, heads=8, seq_len=18)


def test_the_planner_refuses_sp_over_a_tp_that_does_not_divide_the_sequence():
    assert vfm_rejects(Layout(tp=4, sp=True), SPEC) == (
        "sp splits each sequence over tp = 4 ranks, but a sequence of 18 tokens does not divide by 4; accepted: "
        "tp 1, 2, 3, 6, 9, 18 (dividing 18), or the strategy tp instead of sp (every rank keeps the whole sequence)")


def test_the_planner_takes_tp_without_sp_or_a_tp_that_divides_it():
    assert vfm_rejects(Layout(tp=4, sp=False), SPEC) == ""
    assert vfm_rejects(Layout(tp=2, sp=True), SPEC) == ""


def test_the_plan_runs_tp_without_sp_where_tp_does_not_divide_the_sequence():
    from vfm_parallel.planner import load_profile, plan

    result = plan(SPEC, 4, load_profile("h100"), global_batch=8)
    tp4 = [p for p in [*result.ranked, *result.others] if p.layout.tp == 4]
    assert tp4 and all(not p.layout.sp for p in tp4)  # 18 tokens: sp over tp 4 would be refused, tp runs
    assert all(p.layout.sp for p in result.ranked if p.layout.tp == 2 and p.layout.cp == 1)
