"""vfm plan's model against the seeds' two DiT throughput tables (issue 16's done-when), and the
planner's own rules: vfm-accepted layouts only, OOM and rule reasons, the [parallel] block."""

from __future__ import annotations

import dataclasses
import tomllib

import pytest

from vfm_parallel.planner import Layout, ModelSpec, enumerate_layouts, load_profile, memory, parallel_block, plan, predict
from vfm_parallel.planner.timing import gemm_shape_factor, group_bandwidth
from vfm_parallel.planner.measure import spearman
from vfm_parallel.trainer.config import from_dict

# The seeds' dit-cross presets (vfm_models: 32 x 3072 and 48 x 5120, head_dim 128), counted on the meta device.
DIT_7B = dict(name="dit-cross-7B", params=6_876_691_520, layers=32, hidden=3072, heads=24)
DIT_28B = dict(name="dit-cross-28B", params=27_264_910_400, layers=48, hidden=5120, heads=40)
MODELS = {"7B": DIT_7B, "28B": DIT_28B}
TOKENS = {"8k": 8192, "64k": 65536, "74k": 73728}  # 32 x 16 x 16; 64 Ki; 32 x 48 x 48 latent patches
GPUS = 256  # 32 DGX H100 nodes of 8
# One assumption for every row (the tables do not say): 1024 samples per optimizer step.
GLOBAL_BATCH = 1024

# (table, model, context, (tp, cp, pp), activation checkpointing (None = either), tokens/s/GPU)
# table A: seeds/000 (blog, Table 1); table B: seeds/004 (framework docs).
ROWS = [
    ("A", "7B", "8k", (1, 2, 1), None, 8969),
    ("B", "7B", "8k", (2, 1, 1), None, 10052),
    ("A", "7B", "74k", (4, 4, 1), None, 2933),
    ("B", "7B", "74k", (2, 4, 1), None, 3409),
    ("A", "28B", "8k", (2, 1, 2), None, 2392),
    ("B", "28B", "8k", (4, 1, 4), None, 2510),
    ("A", "28B", "74k", (8, 4, 4), None, 994),
    ("B", "28B", "64k", (1, 1, 1), True, 1386),
]
# Rows whose published layout the model does not put in its top 3 of (tp, cp, pp) shapes, and why
# (docs/plan.md, "Where the model falls short"). Strict: the day one of them passes, the marker must go.
NOT_TOP3 = {
    ("A", "28B", "8k"): "tp2 pp2 under the distributed optimizer fits with 13 of its 24 blocks per stage checkpointed "
                        "and is then predicted within 3% of the published figure, but 14% behind the 3rd (tp4 shapes need no recompute)",
    ("B", "28B", "8k"): "tp4 pp4 is 5th, 1.5% behind the 3rd, of seven shapes within 5% of the best",
    ("B", "28B", "64k"): "FSDP at 64k fits only with all 48 blocks checkpointed (one block's activations are 24 GiB); "
                         "the published figure implies far less recompute than the 4/3 of full recompute",
}


def _id(row):
    return f"{row[0]}-{row[1]}-{row[2]}-tp{row[3][0]}cp{row[3][1]}pp{row[3][2]}"


@pytest.fixture(scope="module")
def h100():
    return load_profile("h100")


_PLANS: dict = {}


def seeds_plan(model: str, context: str, hw):
    """The tables were measured with NeMo/Megatron-Core: plan with its data-parallel kinds and rules."""
    key = (model, context)
    if key not in _PLANS:
        spec = ModelSpec(seq_len=TOKENS[context], **MODELS[model])
        _PLANS[key] = plan(spec, GPUS, hw, global_batch=GLOBAL_BATCH, framework="megatron")
    return _PLANS[key]


def _matches(mp, ac):
    return lambda layout: layout.model_parallel() == mp and (ac is None or bool(layout.activation_checkpointing) == ac)


@pytest.mark.parametrize("row", ROWS, ids=_id)
def test_published_layout_predicted_within_25_percent_of_published_tokens_per_s(row, h100):
    _, model, context, mp, ac, published = row
    result = seeds_plan(model, context, h100)
    fits = [p for p in result.ranked if _matches(mp, ac)(p.layout)]
    assert fits, f"the published layout {mp} is predicted not to fit"
    predicted = fits[0].tokens_per_s_per_gpu
    assert abs(predicted / published - 1) <= 0.25, (predicted, published)


@pytest.mark.parametrize("row", ROWS, ids=_id)
def test_published_layout_among_top_3_predicted(row, h100, request):
    table, model, context, mp, ac, _ = row
    if (table, model, context) in NOT_TOP3:
        request.applymarker(pytest.mark.xfail(strict=True, reason=NOT_TOP3[table, model, context]))
    rank = seeds_plan(model, context, h100).rank_of(_matches(mp, ac))
    assert rank is not None and rank <= 3, rank


def test_published_baseline_without_optimization_is_predicted_oom(h100):
    """Both tables: DiT 7B at 8k, 'baseline, no optimization' (plain data parallelism) is OOM."""
    spec = ModelSpec(seq_len=8192, **DIT_7B)
    for framework in ("vfm", "megatron"):
        baseline = predict(spec, Layout(dp_replicate=GPUS, grad_accum=GLOBAL_BATCH // GPUS), h100, framework=framework)
        assert baseline.oom and baseline.reason.startswith("OOM at "), baseline.reason


def test_every_ranked_layout_is_one_vfm_train_accepts(h100):
    spec = ModelSpec(seq_len=8192, **DIT_7B)
    result = plan(spec, 64, h100, global_batch=128)
    assert result.ranked
    for p in result.ranked[:40]:
        table = p.layout.parallel_table()
        from_dict({"parallel": table, "data": {"source": "synthetic", "micro_batch": p.layout.micro_batch},
                   "optim": {"grad_accum": p.layout.grad_accum}}, 64)
        p.layout.dims.validate(64, spec, spec.seq_len)
    refused = [p for p in result.others if p.rejected]
    assert any("context parallelism" in p.reason for p in refused)  # pp with cp is refused, with vfm's words


def test_tp_across_nodes_is_named_as_the_reason_it_loses(h100):
    spec = ModelSpec(name="llama-ish-7B", params=7_000_000_000, layers=32, hidden=4096, heads=32, seq_len=8192)
    result = plan(spec, 64, h100, global_batch=128, max_tp=16)
    cross = [p for p in result.ranked if p.layout.tp == 16]
    assert cross and all(p.reason.startswith("TP across nodes") for p in cross)


def test_winner_block_is_valid_toml_that_vfm_train_accepts(h100):
    spec = ModelSpec(seq_len=8192, **DIT_7B)
    result = plan(spec, 16, h100, global_batch=32)
    block = tomllib.loads(parallel_block(result.best))
    from_dict({"parallel": block["parallel"], "data": {"source": "synthetic", "micro_batch": result.best.layout.micro_batch},
               "optim": {"grad_accum": result.best.layout.grad_accum}}, 16)


def test_more_gpu_memory_turns_an_oom_layout_into_a_fitting_one():
    spec = ModelSpec(seq_len=8192, **DIT_7B)
    layout = Layout(tp=2, dp_replicate=8)  # DDP: fp32 states unsharded
    assert predict(spec, layout, load_profile("h100")).oom
    assert not predict(spec, layout, load_profile("h200")).oom


def test_spearman_is_one_for_the_same_order_and_minus_one_for_the_reverse():
    assert spearman([3, 2, 1], [30, 20, 10]) == pytest.approx(1.0)
    assert spearman([3, 2, 1], [10, 20, 30]) == pytest.approx(-1.0)


def test_a_collective_across_nodes_runs_on_the_nics_of_all_its_members_on_a_node(h100):
    """NCCL spreads a cross-node collective over one NIC per member on each node; a send uses one NIC."""
    nic, nvlink = h100.inter_node_gbps * 1e9, h100.intra_node_gbps * 1e9
    assert group_bandwidth(1, 8, h100) == (nvlink, False)
    assert group_bandwidth(8, 32, h100) == (nic, True)  # one member per node (e.g. DP under TP 8)
    assert group_bandwidth(2, 128, h100) == (4 * nic, True)  # four members per node
    assert group_bandwidth(1, 256, h100) == (min(nvlink, 8 * nic), True)  # all eight: capped by NVLink
    assert group_bandwidth(1, 256, h100, p2p=True) == (nic, True)  # a ring hop or a stage send


def test_thinner_per_rank_matrices_run_at_a_lower_gemm_efficiency(h100):
    spec = ModelSpec(seq_len=8192, **DIT_28B)
    whole, tp8, short = (gemm_shape_factor(spec, 1, 8192, h100), gemm_shape_factor(spec, 8, 8192, h100),
                         gemm_shape_factor(spec, 1, 1024, h100))
    assert 1 < whole < tp8 and whole < short
    off = dataclasses.replace(h100, calibration=dataclasses.replace(h100.calibration, gemm_roofline=0.0))
    assert gemm_shape_factor(spec, 8, 1024, off) == 1.0
    # the same FLOPs per GPU take longer when TP slices the matrices (compute component, per token)
    a, b = (predict(spec, Layout(tp=tp, pp=8 // tp, dp_shard=2, distopt=True, micro_batch=8, pp_microbatches=8 if tp < 8 else 0),
                    h100, framework="megatron") for tp in (1, 8))
    assert b.time.compute / b.time.tokens_per_step > a.time.compute / a.time.tokens_per_step


def test_megatron_layouts_are_the_combinations_the_seeds_list_as_supported():
    """seeds/004: FSDP, CP+TP+SP+FSDP, CP+TP+SP(+PP)+distopt: PP only with the distributed optimizer,
    and a pipeline runs a rank's whole share of the global batch (no flush between micro-steps)."""
    spec = ModelSpec(seq_len=8192, **DIT_28B)
    layouts = list(enumerate_layouts(64, spec, 256, framework="megatron"))
    piped = [x for x in layouts if x.pp > 1]
    assert piped and all(x.distopt and x.grad_accum == 1 and x.pp_schedule == "1f1b" for x in piped)
    assert any(x.dp_kind == "fsdp" and x.pp == 1 and x.tp > 1 and x.cp > 1 for x in layouts)


def test_activation_overhead_scales_the_activations_and_nothing_else():
    spec = ModelSpec(seq_len=8192, **DIT_7B)
    layout = Layout(tp=2, dp_shard=4)
    one, more = memory(spec, layout), memory(spec, layout, activation_overhead=1.5)
    assert more.activations == pytest.approx(1.5 * one.activations) and more.states == one.states


def test_calibrated_gpu_efficiency_reproduces_the_measured_matmul_through_the_shape_roofline(h100):
    """--calibrate on a GPU: the stored efficiency is the large-shape one, so the model's time for the
    measured 4096^3 matmul (efficiency x peak, slowed by its roofline factor) is the measured time."""
    from vfm_parallel.planner.calibrate import profile_from

    measured = {"matmul_tflops": 600.0, "attention_tflops": 400.0, "matmul_size": 4096, "attention_seq": 4096}
    prof = profile_from(measured, h100, device="cuda:0", memory_gib=79.6)
    ridge = prof.calibration.matmul_efficiency * prof.peak_bf16_tflops / prof.hbm_gbps * 1e3
    modelled = prof.calibration.matmul_efficiency * prof.peak_bf16_tflops / (1 + ridge * 3 / 4096)
    assert modelled == pytest.approx(600.0, rel=1e-2)
    assert prof.calibration.matmul_efficiency > 600.0 / h100.peak_bf16_tflops


def test_cpu_calibration_clamps_an_attention_efficiency_above_1_and_says_why():
    """On a CPU the measured matmul rate is the peak; attention measured faster stored an efficiency
    above 1 (the planner then timed attention faster than the peak)."""
    from vfm_parallel.planner.calibrate import profile_from
    from vfm_parallel.planner.hardware import from_dict, to_toml

    measured = {"matmul_tflops": 0.02, "attention_tflops": 0.05, "matmul_size": 768, "attention_seq": 512}
    profile = profile_from(measured, load_profile("cpu"), device="cpu", memory_gib=8.0)
    assert profile.calibration.attention_efficiency == 1.0
    assert "attention_efficiency 2.5 clamped to 1" in profile.calibration.source
    assert from_dict(tomllib.loads(to_toml(profile))).calibration.attention_efficiency == 1.0


def test_a_calibrated_profile_says_what_its_gpus_per_node_counts():
    from vfm_parallel.planner.calibrate import profile_from

    measured = {"matmul_tflops": 0.02, "attention_tflops": 0.01, "all_reduce_gbps": 0.5, "ranks": 2}
    cpu = profile_from(measured, load_profile("cpu"), device="cpu", memory_gib=8.0, per_node=2)
    assert (cpu.gpus_per_node, cpu.device) == (2, "cpu")
    assert "gpus_per_node = 2: the ranks calibrated together on this host" in cpu.description
    gpu = profile_from({"matmul_tflops": 600.0, "attention_tflops": 400.0}, load_profile("h100"), device="cuda",
                       memory_gib=79.6, per_node=4)
    assert (gpu.gpus_per_node, gpu.device) == (4, "cuda")
    assert "gpus_per_node = 4: this machine's GPU count" in gpu.description


def test_a_profile_device_other_than_cuda_or_cpu_is_refused_naming_the_accepted():
    from vfm_parallel.planner.hardware import ProfileError, from_dict

    data = {"name": "x", "peak_bf16_tflops": 1.0, "memory_gib": 8.0, "intra_node_gbps": 1.0, "inter_node_gbps": 1.0,
            "device": "tpu"}
    with pytest.raises(ProfileError, match="'device' must be one of 'cuda', 'cpu'"):
        from_dict(data)
