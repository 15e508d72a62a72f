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
#: Of a block's kernels, the ones selective checkpointing runs again: all but the 12 linears and the
#: two attentions of KERNELS_PER_BLOCK.
SELECTIVE_RECOMPUTED_KERNELS = KERNELS_PER_BLOCK - 14


@dataclass(frozen=True)
class Recompute:
    """What activation checkpointing runs again in backward, as shares of one forward of a stage."""

    full: float  # blocks recomputed whole (FLOPs, kernels): checkpointed / L' under full checkpointing
    selective: float  # blocks whose element-wise ops are recomputed (selective checkpointing)

    @property
    def comm(self) -> float:
        """Forward collectives run again: a checkpointed block's TP gathers and reduce-scatters and CP
        hops are no matmul or attention output, so selective checkpointing re-runs them too."""
        return self.full + self.selective

    @property
    def kernels(self) -> float:
        return self.full + self.selective * SELECTIVE_RECOMPUTED_KERNELS / KERNELS_PER_BLOCK

    @classmethod
    def of(cls, spec: ModelSpec, layout: Layout) -> "Recompute":
        share = layout.checkpointed(spec.layers) / (spec.layers // layout.pp)
        if layout.activation_checkpointing == "selective":
            return cls(0.0, share)
        return cls(share, 0.0)


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
    #: Of ``compute``, the seconds activation checkpointing runs again (not a component of its own:
    #: why_slower tells a loss to recompute from one to thinner matrices with it).
    recompute: float = 0.0

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
    crosses: dict = {}  # group -> whether it crosses nodes, filled by each part
    t_compute, t_attention, t_recompute = _compute_time(spec, layout, hw)
    t_tp = _tp_time(spec, layout, hw, crosses)
    t_cp = _cp_time(spec, layout, hw, t_attention, crosses)
    p_rank = spec.params / (layout.tp * layout.pp)
    t_dp = _dp_time(layout, hw, p_rank, spec.layers / layout.pp, t_compute, framework, crosses)
    t_bubble, t_pp = _pipeline_time(spec, layout, hw, t_compute + t_tp + t_cp, crosses)
    t_kernels = _kernel_time(spec, layout, hw)
    if layout.pp > 1:
        t_bubble += t_kernels * (layout.pp - 1) / layout.n_micro
    # --- optimizer: AdamW + EMA read and write every sharded state once (memory bound) --------------
    shards = layout.dp * layout.cp if layout.distopt else layout.fsdp_shards
    state_bytes = p_rank / shards * (4 + 4 + 8 + (4 if ema and not layout.distopt else 0)) * 2
    t_opt = state_bytes / (hw.hbm_gbps * 1e9)
    ga = layout.grad_accum
    return StepTime(compute=ga * t_compute, kernels=ga * t_kernels, tp_comm=ga * t_tp, cp_comm=ga * t_cp, dp_comm=ga * t_dp,
                    pp_bubble=ga * t_bubble, pp_comm=ga * t_pp, optimizer=t_opt,
                    tokens_per_step=layout.dp * layout.micro_batch * ga * spec.seq_len, world=layout.world_size,
                    model_flops_per_token=spec.model_flops_per_token, crosses_nodes=crosses, recompute=ga * t_recompute)


def _compute_time(spec: ModelSpec, layout: Layout, hw: HardwareProfile) -> tuple[float, float, float]:
    """(compute, of which attention, of which recompute) seconds of one micro-step on one rank."""
    cal = hw.calibration
    tp, cp, pp, S, mb = layout.tp, layout.cp, layout.pp, spec.seq_len, layout.micro_batch
    rc = Recompute.of(spec, layout)
    again = 1.0 + rc.full / 3.0  # a recomputed block runs its forward (1/3 of forward + backward) twice
    flops = mb * S * spec.model_flops_per_token / (tp * cp * pp) * again
    attn_flops = mb * S * spec.attention_flops_per_token / (tp * cp * pp) * again
    # per-rank shapes: a GEMM's M is the tokens of one (pipeline) microbatch on this CP rank (SP
    # gathers them before each column-parallel linear); the attention kernel sees S/cp queries
    # against S/cp keys per ring hop
    tokens = mb / layout.n_micro * S / cp if pp > 1 else mb * S / cp
    t_attention = attn_flops / (cal.attention_efficiency * hw.peak_flops) * attention_shape_factor(spec, layout, hw)
    t_compute = (flops - attn_flops) / (cal.matmul_efficiency * hw.peak_flops) * gemm_shape_factor(spec, tp, tokens, hw) + t_attention
    t_recompute = t_compute * (1 - 1 / again)
    if rc.selective:
        # the element-wise ops between the kept outputs run again: each recomputed tensor (what the
        # block keeps without checkpointing less what selective keeps: its input and the matmul and
        # attention outputs; 54 - 28 bytes for dit-cross) read and written once at HBM speed
        split, whole = spec.selective_widths()
        recomputed = max(0.0, spec.act_bytes_per_token - ACT_BYTES * (1 + split + whole))
        blocks = rc.selective * spec.layers / pp
        t_selective = 2 * recomputed * spec.hidden * mb * S / (cp * tp) * blocks / (hw.hbm_gbps * 1e9)
        t_compute += t_selective
        t_recompute += t_selective
    return t_compute, t_attention, t_recompute


def _tp_time(spec: ModelSpec, layout: Layout, hw: HardwareProfile, crosses: dict) -> float:
    """Tensor (+ sequence) parallel: an all-gather into and a reduce-scatter out of each region."""
    tp = layout.tp
    if tp <= 1:
        return 0.0
    bw, crosses["tp"] = group_bandwidth(1, tp, hw)
    passes = 2 + Recompute.of(spec, layout).comm  # forward, backward (+ the recomputed blocks' forward)
    calls = spec.layers / layout.pp * spec.tp_regions * 2 * passes
    nbytes = calls * (tp - 1) / tp * layout.micro_batch * spec.seq_len / layout.cp * spec.hidden * ACT_BYTES
    return (1 - hw.calibration.tp_overlap) * _collective(nbytes, calls, bw, hw)


def _cp_time(spec: ModelSpec, layout: Layout, hw: HardwareProfile, t_attention: float, crosses: dict) -> float:
    """Context parallel: Ulysses all-to-alls, or the ring's K/V hops beyond what attention hides."""
    tp, cp, h = layout.tp, layout.cp, spec.hidden
    if cp <= 1:
        return 0.0
    again = Recompute.of(spec, layout).comm  # share of the layers whose forward hops run again
    full_layers = spec.full_layers / layout.pp
    bw, crosses["cp"] = group_bandwidth(tp, cp, hw, p2p=layout.cp_strategy != "cp-ulysses")
    shard = layout.micro_batch * spec.seq_len / cp
    if layout.cp_strategy == "cp-ulysses":
        # q, k, v in and the output back, forward and backward (+ recompute): not overlapped
        calls = full_layers * 4 * (2 + again)
        return _collective(calls * (cp - 1) / cp * shard * h / tp * ACT_BYTES, calls, bw, hw)
    # ring: K and V blocks per hop forward; K, V and their gradients per hop backward. A hop's
    # transfer hides behind the attention of the block in hand; only the excess shows.
    kv_width = spec.num_kv_heads * spec.head_dim / tp
    calls = full_layers * (cp - 1) * (2 + 4 + 2 * again)
    t_ring = _collective(calls * shard * kv_width * ACT_BYTES, calls, bw, hw)
    # each remote block's partial result is merged into fp32 accumulators (online softmax
    # forward; dQ, dK, dV backward): memory-bound passes the ring adds, not hidden
    merge = full_layers * (cp - 1) * shard * h / tp * RING_MERGE_BYTES
    return max(0.0, t_ring - t_attention * (cp - 1) / cp) + merge / (hw.hbm_gbps * 1e9)


def _dp_time(layout: Layout, hw: HardwareProfile, p_rank: float, layers: float, t_compute: float, framework: str,
             crosses: dict) -> float:
    """Data parallel per micro-step: FSDP gathers and reduce-scatters, HSDP/DDP all-reduces, or
    Megatron's distributed optimizer once per step; what the compute does not hide."""
    cal, tp, cp, kind = hw.calibration, layout.tp, layout.cp, layout.dp_kind
    if kind in ("fsdp", "hsdp"):
        n = layout.dp_shard * cp
        bw, crosses["dp_shard"] = group_bandwidth(tp, n, hw)
        # vfm gathers its fp32 parameters; Megatron's FSDP gathers bf16 weights and reduce-scatters
        # fp32 gradients (grad_reduce_in_fp32)
        gather_bytes = MEGATRON_GATHER_BYTES if framework == "megatron" else PARAM_COMM_BYTES
        gather = 2 * (n - 1) / n * p_rank * gather_bytes  # forward and backward all-gathers
        scatter = (n - 1) / n * p_rank * PARAM_COMM_BYTES
        t_raw = _collective(gather + scatter, 3 * layers, bw, hw)
        if kind == "hsdp":
            r = layout.dp_replicate
            rbw, crosses["dp_replicate"] = group_bandwidth(tp * cp * layout.dp_shard, r, hw)
            t_raw += _collective(2 * (r - 1) / r * p_rank / n * PARAM_COMM_BYTES, layers, rbw, hw)
        return max(t_raw - t_compute, (1 - cal.dp_overlap) * t_raw)
    if kind == "distopt":
        # once per optimizer step: reduce-scatter fp32 gradients (overlapped with the last micro-step's
        # backward) and all-gather bf16 weights (with the next step's first forward), over dp x cp
        n = layout.dp * cp
        bw, crosses["dp"] = group_bandwidth(tp, n, hw)
        t_once = _collective((n - 1) / n * p_rank * (PARAM_COMM_BYTES + MEGATRON_GATHER_BYTES), 2 * layers, bw, hw)
        return max(t_once - t_compute, (1 - cal.dp_overlap) * t_once) / layout.grad_accum
    if kind == "ddp":
        r = layout.dp_replicate * cp
        bw, crosses["dp_replicate"] = group_bandwidth(tp, r, hw)
        t_ar = _collective(2 * (r - 1) / r * p_rank * PARAM_COMM_BYTES, layers, bw, hw)
        return max(t_ar - t_compute * 2 / 3, (1 - cal.dp_overlap) * t_ar)  # buckets overlap the backward
    return 0.0


def _pipeline_time(spec: ModelSpec, layout: Layout, hw: HardwareProfile, stage_work: float,
                   crosses: dict) -> tuple[float, float]:
    """(bubble, stage-to-stage sends) of a pipeline micro-step; (0, 0) without one."""
    pp = layout.pp
    if pp <= 1:
        return 0.0, 0.0
    t_bubble = stage_work * (pp - 1) / layout.n_micro
    bw, crosses["pp"] = group_bandwidth(layout.world_size // pp, pp, hw, p2p=True)
    per_micro = (layout.micro_batch / layout.n_micro) * spec.seq_len / layout.cp * spec.hidden / layout.tp * ACT_BYTES
    return t_bubble, _collective(2 * layout.n_micro * per_micro, 2 * layout.n_micro, bw, hw)


def _kernel_time(spec: ModelSpec, layout: Layout, hw: HardwareProfile) -> float:
    """The fixed per-kernel cost (launch, tail of small kernels): grows with the number of kernels a
    micro-step runs, not with its FLOPs, so it is what makes slicing a small problem finely lose."""
    pp, cp = layout.pp, layout.cp
    passes = 2 + Recompute.of(spec, layout).kernels  # forward = 1 kernel set, backward = 2, recompute = 1 more
    runs = layout.n_micro if pp > 1 else 1  # a pipeline runs every layer once per microbatch
    ring = cp > 1 and layout.cp_strategy != "cp-ulysses"
    kernels = runs * (spec.layers / pp * KERNELS_PER_BLOCK * (passes + 1) / 2
                      + (spec.full_layers / pp * (cp - 1) * RING_KERNELS_PER_HOP * (passes + 1) / 2 if ring else 0))
    return kernels * hw.calibration.kernel_overhead_us * 1e-6
