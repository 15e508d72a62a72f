"""Step time of a layout: compute at the profile's calibrated efficiency, each strategy's
communication from the bytes its collectives move (the same per-rank counts ``comm_stats`` records)
over the link its group sits on, what overlaps with what, and the pipeline bubble.

Rank placement follows the mesh order ``pp, dp_replicate, dp_shard, cp, tp`` (TP innermost): a
group whose ranks span ``stride x size`` consecutive ranks stays on one node's NVLink when that
span fits in a node, else it crosses the network.
"""

from __future__ import annotations

from dataclasses import dataclass

from vfm_parallel.planner.hardware import HardwareProfile
from vfm_parallel.planner.layouts import Layout
from vfm_parallel.planner.model_spec import ModelSpec

#: Bytes of one activation element on the wire (bf16 under autocast).
ACT_BYTES = 2
#: Bytes per parameter FSDP gathers and reduce-scatters (vfm's trainer keeps fp32 parameters).
PARAM_COMM_BYTES = 4
#: Bytes per parameter Megatron's FSDP and distributed optimizer all-gather (bf16 weights).
MEGATRON_GATHER_BYTES = 2
#: fp32 bytes read and written per token and hidden unit to merge one ring hop's partial attention
#: (forward: output and log-sum-exp, 3 x 4; backward: the dQ, dK, dV accumulators, 3 x 3 x 4).
RING_MERGE_BYTES = 48
#: Kernels one transformer block launches per forward pass (norms, modulations, 12 linears, QK
#: norms, RoPE, two attentions, gates, residual adds, GELU: about 40 in dit-cross); backward ~2x.
KERNELS_PER_BLOCK = 40
#: Kernels a ring hop adds per forward (partial attention, merge, send/recv), backward ~2x.
RING_KERNELS_PER_HOP = 3


@dataclass(frozen=True)
class StepTime:
    """Seconds per optimizer step, split into what the step spends them on (exposed parts only)."""

    compute: float
    kernels: float
    tp_comm: float
    cp_comm: float
    dp_comm: float
    pp_bubble: float
    pp_comm: float
    optimizer: float
    tokens_per_step: float
    world: int
    model_flops_per_token: float
    crosses_nodes: dict

    @property
    def total(self) -> float:
        return self.compute + self.kernels + self.tp_comm + self.cp_comm + self.dp_comm + self.pp_bubble + self.pp_comm + self.optimizer

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_step / (self.total * self.world)

    @property
    def tflops_per_gpu(self) -> float:
        """Model TFLOP/s per GPU (6N + 12LhS convention, recompute not counted), as the seeds report."""
        return self.tokens_per_s_per_gpu * self.model_flops_per_token / 1e12

    def breakdown(self) -> dict[str, float]:
        keys = ("compute", "kernels", "tp_comm", "cp_comm", "dp_comm", "pp_bubble", "pp_comm", "optimizer")
        return {k: getattr(self, k) for k in keys}


def group_bandwidth(stride: int, size: int, hw: HardwareProfile, *, p2p: bool = False) -> tuple[float, bool]:
    """(bytes/s per rank, crosses nodes) of a group of ``size`` ranks ``stride`` apart.

    Inside a node: NVLink. Across nodes, a collective (all-gather, reduce-scatter, all-reduce) whose
    group has k members on each node runs on those k GPUs' k NICs at once (NCCL's rings/trees use
    one NIC per channel; every GPU of a DGX has its own): k x the per-GPU network bandwidth, at most
    NVLink's. A point-to-point send (CP ring hop, pipeline stage) uses the sender's one NIC."""
    crosses = stride * size > hw.gpus_per_node
    if not crosses:
        return hw.intra_node_gbps * 1e9, False
    per_node = 1 if p2p or stride >= hw.gpus_per_node else min(size, hw.gpus_per_node // stride)
    return min(hw.intra_node_gbps, per_node * hw.inter_node_gbps) * 1e9, True


def gemm_shape_factor(spec: ModelSpec, tp: int, tokens: float, hw: HardwareProfile) -> float:
    """How much longer than at the large-GEMM efficiency the block's linears take on one rank: a smooth
    roofline. A GEMM of M x K x N moves at least 2 (MK + KN + MN) bytes of HBM for 2 MKN FLOPs, in
    forward and both backward products alike, so its time is F / (eta peak) + bytes / HBM bandwidth:
    the factor is 1 + (eta peak / HBM) (1/M + 1/K + 1/N), FLOP-weighted over the block's linears
    with TP splitting N (column-parallel) or K (row-parallel). Slicing the per-rank problem thinly
    (small M under CP/PP microbatches, small K or N under TP) loses efficiency; no fitted constant."""
    ridge = hw.calibration.gemm_roofline * hw.calibration.matmul_efficiency * hw.peak_flops / (hw.hbm_gbps * 1e9)
    total = weighted = 0.0
    for k, n, style in spec.token_linears():
        if style == "col":
            n = n / tp
        else:
            k = k / tp
        w = k * n
        total += w
        weighted += w * (1 / tokens + 1 / k + 1 / n)
    return 1 + ridge * weighted / total if total else 1.0


def attention_shape_factor(spec: ModelSpec, layout: Layout, hw: HardwareProfile) -> float:
    """The same smooth roofline for the attention kernel: per head, S_q x S_kv scores cost 4 S_q S_kv d
    FLOPs and at least 2 (2 S_q d + 2 S_kv d) bytes (Q, O in; K, V), so the factor is
    1 + (eta peak / HBM) (1/S_q + 1/S_kv): S/cp x S/cp per ring hop, the full S under Ulysses."""
    ridge = hw.calibration.gemm_roofline * hw.calibration.attention_efficiency * hw.peak_flops / (hw.hbm_gbps * 1e9)
    s = spec.seq_len if layout.cp_strategy == "cp-ulysses" else spec.seq_len / layout.cp
    return 1 + ridge * 2 / s


def _collective(nbytes: float, calls: float, bw: float, hw: HardwareProfile) -> float:
    return nbytes / bw + calls * hw.collective_latency_us * 1e-6


def step_time(spec: ModelSpec, layout: Layout, hw: HardwareProfile, *, ema: bool = True, framework: str = "vfm") -> StepTime:
    cal = hw.calibration
    tp, cp, pp = layout.tp, layout.cp, layout.pp
    layers = spec.layers / pp
    full_layers = spec.full_layers / pp
    ac = layout.activation_checkpointing
    S, h = spec.seq_len, spec.hidden
    mb = layout.micro_batch
    crosses = {}

    # --- compute of one micro-step on one rank ------------------------------------------------------
    flops = mb * S * spec.model_flops_per_token / (tp * cp * pp)
    if ac:
        flops *= 4.0 / 3.0  # the forward runs twice
    attn_flops = mb * S * spec.attention_flops_per_token / (tp * cp * pp) * (4.0 / 3.0 if ac else 1.0)
    # per-rank shapes: a GEMM's M is the tokens of one (pipeline) microbatch on this CP rank (SP
    # gathers them before each column-parallel linear); the attention kernel sees S/cp queries
    # against S/cp keys per ring hop
    tokens = mb / layout.n_micro * S / cp if pp > 1 else mb * S / cp
    t_attention = attn_flops / (cal.attention_efficiency * hw.peak_flops) * attention_shape_factor(spec, layout, hw)
    t_compute = (flops - attn_flops) / (cal.matmul_efficiency * hw.peak_flops) * gemm_shape_factor(spec, tp, tokens, hw) + t_attention

    # --- tensor (+ sequence) parallel: all-gather into and reduce-scatter out of each region -------
    t_tp = 0.0
    if tp > 1:
        bw, crosses["tp"] = group_bandwidth(1, tp, hw)
        passes = 3 if ac else 2  # forward, backward (+ the recomputed forward)
        calls = layers * spec.tp_regions * 2 * passes
        nbytes = calls * (tp - 1) / tp * mb * S / cp * h * ACT_BYTES
        t_tp = (1 - cal.tp_overlap) * _collective(nbytes, calls, bw, hw)

    # --- context parallel ---------------------------------------------------------------------------
    t_cp = 0.0
    if cp > 1:
        bw, crosses["cp"] = group_bandwidth(tp, cp, hw, p2p=layout.cp_strategy != "cp-ulysses")
        shard = mb * S / cp
        if layout.cp_strategy == "cp-ulysses":
            # q, k, v in and the output back, forward and backward (+ recompute): not overlapped
            passes = 3 if ac else 2
            calls = full_layers * 4 * passes
            nbytes = calls * (cp - 1) / cp * shard * h / tp * ACT_BYTES
            t_cp = _collective(nbytes, calls, bw, hw)
        else:
            # ring: K and V blocks per hop forward; K, V and their gradients per hop backward. A hop's
            # transfer hides behind the attention of the block in hand; only the excess shows.
            kv_width = spec.num_kv_heads * spec.head_dim / tp
            blocks_per_hop = 2 + 4 + (2 if ac else 0)
            calls = full_layers * (cp - 1) * blocks_per_hop
            nbytes = calls * shard * kv_width * ACT_BYTES
            t_ring = _collective(nbytes, calls, bw, hw)
            # each remote block's partial result is merged into fp32 accumulators (online softmax
            # forward; dQ, dK, dV backward): memory-bound passes the ring adds, not hidden
            merge = full_layers * (cp - 1) * shard * h / tp * RING_MERGE_BYTES
            t_cp = max(0.0, t_ring - t_attention * (cp - 1) / cp) + merge / (hw.hbm_gbps * 1e9)

    # --- data parallel: FSDP gathers and reduce-scatters per micro-step, HSDP/DDP all-reduce --------
    p_rank = spec.params / (tp * pp)
    t_dp = 0.0
    kind = layout.dp_kind
    if kind in ("fsdp", "hsdp"):
        n = layout.dp_shard * cp
        bw, crosses["dp_shard"] = group_bandwidth(tp, n, hw)
        # vfm gathers its fp32 parameters; Megatron's FSDP gathers bf16 weights and reduce-scatters
        # fp32 gradients (grad_reduce_in_fp32)
        gather_bytes = MEGATRON_GATHER_BYTES if framework == "megatron" else PARAM_COMM_BYTES
        gather = 2 * (n - 1) / n * p_rank * gather_bytes  # forward and backward all-gathers
        scatter = (n - 1) / n * p_rank * PARAM_COMM_BYTES
        t_dp_raw = _collective(gather + scatter, 3 * layers, bw, hw)
        if kind == "hsdp":
            r = layout.dp_replicate
            rbw, crosses["dp_replicate"] = group_bandwidth(tp * cp * layout.dp_shard, r, hw)
            t_dp_raw += _collective(2 * (r - 1) / r * p_rank / n * PARAM_COMM_BYTES, layers, rbw, hw)
        t_dp = max(t_dp_raw - t_compute, (1 - cal.dp_overlap) * t_dp_raw)
    elif kind == "distopt":
        # once per optimizer step: reduce-scatter fp32 gradients (overlapped with the last micro-step's
        # backward) and all-gather bf16 weights (with the next step's first forward), over dp x cp
        n = layout.dp * cp
        bw, crosses["dp"] = group_bandwidth(tp, n, hw)
        t_once = _collective((n - 1) / n * p_rank * (PARAM_COMM_BYTES + MEGATRON_GATHER_BYTES), 2 * layers, bw, hw)
        t_dp = max(t_once - t_compute, (1 - cal.dp_overlap) * t_once) / layout.grad_accum
    elif kind == "ddp":
        r = layout.dp_replicate * cp
        bw, crosses["dp_replicate"] = group_bandwidth(tp, r, hw)
        t_ar = _collective(2 * (r - 1) / r * p_rank * PARAM_COMM_BYTES, layers, bw, hw)
        t_dp = max(t_ar - t_compute * 2 / 3, (1 - cal.dp_overlap) * t_ar)  # buckets overlap the backward

    # --- pipeline: bubble and stage-to-stage sends --------------------------------------------------
    t_bubble = t_pp = 0.0
    if pp > 1:
        stage_work = t_compute + t_tp + t_cp
        t_bubble = stage_work * (pp - 1) / layout.n_micro
        bw, crosses["pp"] = group_bandwidth(layout.world_size // pp, pp, hw, p2p=True)
        per_micro = (mb / layout.n_micro) * S / cp * h / tp * ACT_BYTES
        t_pp = _collective(2 * layout.n_micro * per_micro, 2 * layout.n_micro, bw, hw)

    # --- fixed per-kernel cost (launch, tail of small kernels): grows with the number of kernels a
    # micro-step runs, not with its FLOPs, so it is what makes slicing a small problem finely lose
    passes = 3 if ac else 2  # forward = 1 kernel set, backward = 2, recompute = 1 more
    runs = layout.n_micro if pp > 1 else 1  # a pipeline runs every layer once per microbatch
    kernels = runs * (layers * KERNELS_PER_BLOCK * (passes + 1) / 2
                      + (full_layers * (cp - 1) * RING_KERNELS_PER_HOP * (passes + 1) / 2 if cp > 1 and layout.cp_strategy != "cp-ulysses" else 0))
    t_kernels = kernels * cal.kernel_overhead_us * 1e-6
    if pp > 1:
        t_bubble += t_kernels * (pp - 1) / layout.n_micro

    micro = t_compute + t_kernels + t_tp + t_cp + t_dp + t_bubble + t_pp
    # --- optimizer: AdamW + EMA read and write every sharded state once (memory bound) --------------
    shards = layout.dp * cp if layout.distopt else layout.fsdp_shards
    state_bytes = p_rank / shards * (4 + 4 + 8 + (4 if ema and not layout.distopt else 0)) * 2
    t_opt = state_bytes / (hw.hbm_gbps * 1e9)
    ga = layout.grad_accum
    return StepTime(compute=ga * t_compute, kernels=ga * t_kernels, tp_comm=ga * t_tp, cp_comm=ga * t_cp, dp_comm=ga * t_dp,
                    pp_bubble=ga * t_bubble, pp_comm=ga * t_pp, optimizer=t_opt,
                    tokens_per_step=layout.dp * mb * ga * S, world=layout.world_size,
                    model_flops_per_token=spec.model_flops_per_token, crosses_nodes=crosses)
