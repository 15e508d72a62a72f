"""``vfm plan --calibrate``: measure this machine (matmul and attention FLOP/s, and under torchrun
all-reduce, all-to-all and p2p bandwidth over the default process group) and turn the figures into a
hardware profile. Works on CPU with gloo for the mechanics; on a GPU the efficiencies are measured
against the base profile's datasheet peak.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

from vfm_parallel.planner.hardware import Calibration, HardwareProfile


def _timed(fn: Callable[[], None], sync: Callable[[], None], repeats: int) -> float:
    fn()
    sync()  # warm-up (and CUDA lazy init) outside the timing
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    sync()
    return (time.perf_counter() - start) / repeats


def measure_compute(device: str = "cpu", size: int = 1024, seq: int = 1024, repeats: int = 5) -> dict[str, float]:
    """Matmul and attention TFLOP/s (bf16 on CUDA, fp32 on CPU) at sizes that fill the device."""
    import torch
    import torch.nn.functional as F

    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    t_mm = _timed(lambda: a @ b, sync, repeats)
    heads, dim = 8, 64
    q = torch.randn(1, heads, seq, dim, device=device, dtype=dtype)
    t_attn = _timed(lambda: F.scaled_dot_product_attention(q, q, q), sync, repeats)
    return {"matmul_tflops": 2 * size**3 / t_mm / 1e12, "attention_tflops": 4 * heads * seq * seq * dim / t_attn / 1e12,
            "matmul_size": size, "attention_seq": seq}


def measure_collectives(nbytes: int = 8 << 20, repeats: int = 5) -> dict[str, float]:
    """Bus bandwidth (GB/s, one direction per rank) of all-reduce, all-to-all and a p2p ring shift
    over the default process group; empty when not distributed."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return {}
    n, rank = dist.get_world_size(), dist.get_rank()
    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    numel = nbytes // 4
    x = torch.ones(numel, device=device)
    t_ar = _timed(lambda: dist.all_reduce(x), sync, repeats)
    numel -= numel % n
    src, dst = torch.ones(numel, device=device), torch.empty(numel, device=device)
    t_a2a = _timed(lambda: dist.all_to_all_single(dst, src), sync, repeats)

    def shift() -> None:
        ops = [dist.P2POp(dist.isend, src, (rank + 1) % n), dist.P2POp(dist.irecv, dst, (rank - 1) % n)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()

    t_p2p = _timed(shift, sync, repeats)
    return {"all_reduce_gbps": 2 * (n - 1) / n * nbytes / t_ar / 1e9, "all_to_all_gbps": (n - 1) / n * nbytes / t_a2a / 1e9,
            "p2p_gbps": nbytes / t_p2p / 1e9, "ranks": n}


def _large_shape_efficiency(tflops: float, peak_tflops: float, seconds_per_flop_hbm: float) -> float:
    """Efficiency eta with 1/tflops = 1/(eta peak) + the HBM seconds per FLOP of the measured shape
    (the measured fraction of peak when the HBM term is not smaller than the measured time)."""
    rest = 1 / (tflops * 1e12) - seconds_per_flop_hbm
    return 1 / (rest * peak_tflops * 1e12) if rest > 0 else tflops / peak_tflops


def profile_from(measured: dict[str, float], base: HardwareProfile, *, device: str, memory_gib: float,
                 per_node: int | None = None) -> HardwareProfile:
    """A profile holding the measurements. On CPU the measured matmul rate is the peak (efficiency 1);
    on a GPU the base profile's datasheet peak stays and the efficiencies become measured fractions.

    ``per_node``: the profile's ``gpus_per_node``, which its description states the meaning of: on a
    GPU the machine's GPU count; on a CPU (no GPUs to count) the ranks calibrated together on this
    host, whose memory share and intra-node bandwidth were measured; None keeps the base profile's."""
    mm, attn = measured["matmul_tflops"], measured["attention_tflops"]
    notes = []
    if device.startswith("cuda"):
        peak = base.peak_bf16_tflops
        # the model's efficiencies are the large-shape ones, before the shape roofline (timing.py):
        # take the HBM term of the measured shape (3/n bytes per FLOP for an n^3 matmul, 2/S for
        # S x S attention) out of the measured time
        w = base.calibration.gemm_roofline / (base.hbm_gbps * 1e9)
        mm_eff = _large_shape_efficiency(mm, peak, w * 3 / measured.get("matmul_size", float("inf")))
        attn_eff = _large_shape_efficiency(attn, peak, w * 2 / measured.get("attention_seq", float("inf")))
        cal = dataclasses.replace(base.calibration, matmul_efficiency=round(mm_eff, 3), attention_efficiency=round(attn_eff, 3))
    else:
        peak = mm
        attn_eff = attn / mm
        if attn_eff > 1:
            # the matmul rate is this CPU's peak: attention cannot run above it (a small or busy
            # measurement, e.g. one thread's SDPA beside a matmul slowed by another job)
            notes.append(f"attention_efficiency {attn_eff:.3g} clamped to 1 (attention measured faster than the "
                         "matmul rate taken as the peak)")
            attn_eff = 1.0
        cal = dataclasses.replace(base.calibration, matmul_efficiency=1.0, attention_efficiency=round(attn_eff, 3))
    bw = measured.get("all_reduce_gbps")
    cal = dataclasses.replace(cal, source=f"vfm plan --calibrate on {device}: "
                              + ", ".join([*(f"{k}={v:.4g}" for k, v in measured.items()), *notes]))
    kind = "cuda" if device.startswith("cuda") else "cpu"
    if not per_node:
        per_node = base.gpus_per_node
        counted = f"gpus_per_node = {per_node}: the base profile's"
    elif kind == "cuda":
        counted = f"gpus_per_node = {per_node}: this machine's GPU count"
    else:
        counted = f"gpus_per_node = {per_node}: the ranks calibrated together on this host (a CPU has no GPUs to count)"
    return dataclasses.replace(
        base, name=f"{base.name}-calibrated", description=f"measured on this machine ({device}; {counted})",
        device=kind, peak_bf16_tflops=round(peak, 4),
        peak_fp8_tflops=round(max(peak, base.peak_fp8_tflops if device.startswith("cuda") else peak), 4),
        memory_gib=round(memory_gib, 2), intra_node_gbps=round(bw, 3) if bw else base.intra_node_gbps,
        inter_node_gbps=round(min(bw, base.inter_node_gbps), 3) if bw else base.inter_node_gbps,
        gpus_per_node=per_node,
        calibration=cal, path="")


def device_memory_gib(device: str) -> float:
    import torch

    if device.startswith("cuda"):
        return torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory / 2**30
    try:
        with open("/proc/meminfo") as f:
            kib = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
        return kib / 2**20
    except (OSError, StopIteration, ValueError):
        return 16.0


def ranks_sharing_memory(device: str) -> int:
    """Ranks of this job whose memory is the one ``device_memory_gib`` reports: a GPU's is its own; on a
    CPU every rank on this host shares it (torchrun's LOCAL_WORLD_SIZE)."""
    import os

    if device.startswith("cuda"):
        return 1
    return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))


def calibrate(base: HardwareProfile, *, device: str | None = None, size: int | None = None) -> tuple[HardwareProfile, dict]:
    """Measure and return (profile, raw figures)."""
    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    size = size or (8192 if device.startswith("cuda") else 768)
    measured = measure_compute(device, size=size, seq=4096 if device.startswith("cuda") else 512)
    measured.update(measure_collectives())
    # the planner counts memory per rank: K ranks on one CPU host each get 1/K of it, not all of it
    memory = device_memory_gib(device) / ranks_sharing_memory(device)
    if device.startswith("cuda"):
        per_node = torch.cuda.device_count()
    else:  # the ranks on this host (LOCAL_WORLD_SIZE), not the job's: under torchrun on several hosts they differ
        per_node = ranks_sharing_memory(device) if measured.get("ranks") else None
    return profile_from(measured, base, device=device, memory_gib=memory, per_node=per_node), measured
