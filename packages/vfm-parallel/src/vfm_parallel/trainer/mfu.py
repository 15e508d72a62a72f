"""Model FLOPs utilisation: achieved training FLOP/s over the device's peak FLOP/s.

MFU = (flops_per_token * tokens_per_second_per_device) / peak_flops_per_device, where
flops_per_token is the model family's training formula (fwd + bwd; for a DiT
6 N + 12 L h S, docs/design.md section 6) injected by the caller, and the peak comes from the table
below, ``--peak-tflops``, or on CPU a measured dense-matmul rate.
"""

from __future__ import annotations

import time

import torch

#: Dense bf16 tensor-core peaks (TFLOP/s, no sparsity) from the vendors' data sheets.
PEAK_TFLOPS_BF16 = {
    "H200": 989.0,
    "H100 SXM": 989.0,
    "H100 PCIe": 756.0,
    "H100 NVL": 835.0,
    "H100": 989.0,
    "A100": 312.0,
    "B200": 2250.0,
    "GB200": 2500.0,
    "L40S": 362.0,
    "A10G": 125.0,
}


def device_peak_tflops(device: torch.device, override: float = 0.0) -> tuple[float, str]:
    """(peak TFLOP/s, where the figure came from) for one device."""
    if override > 0:
        return override, "--peak-tflops"
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key in sorted(PEAK_TFLOPS_BF16, key=len, reverse=True):  # most specific name first
            if key in name:
                return PEAK_TFLOPS_BF16[key], f"table ({key})"
        raise ValueError(f"no peak FLOP/s known for GPU {name!r}; pass --peak-tflops (known: {', '.join(PEAK_TFLOPS_BF16)})")
    return measured_matmul_tflops(), MEASURED


#: where the peak came from when it was measured on this CPU (a busy machine can measure it low)
MEASURED = "measured fp32 matmul"


def measured_matmul_tflops(n: int = 1024, repeats: int = 12) -> float:
    """The best rate of an n x n fp32 matmul on this CPU thread pool: a practical CPU 'peak'.

    Best of several repeats, spread over a fraction of a second, so that a moment when other
    processes hold the cores does not set the peak (a low peak would inflate the MFU); a busy
    machine can still make it low, which is why ``--peak-tflops`` overrides it.
    """
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
        time.sleep(0.01)  # let a transient competitor pass between repeats
    return 2 * n**3 / best / 1e12


def mfu(flops_per_token: float, tokens_per_second: float, world_size: int, peak_tflops: float) -> float:
    """Fraction of the cluster's peak reached: achieved FLOP/s / (world_size * peak FLOP/s)."""
    return flops_per_token * tokens_per_second / (world_size * peak_tflops * 1e12)


class Throughput:
    """Tokens/s over the steps after the first (which pays for warm-up and compilation).

    Step results stay on the device until a flush (a logged step, a checkpoint, the end), so the
    host queues step after step without waiting for the device; each flush times the steps since
    the last one together.
    """

    def __init__(self) -> None:
        self.tokens = 0.0
        self.seconds = 0.0
        self.mark = time.perf_counter()

    def exclude(self, seconds: float) -> None:
        """Leave ``seconds`` just spent on other work (a held-out loss, a preview) out of the next flush's time."""
        self.mark += seconds

    def flush(self, tokens: float, counted: bool) -> float:
        """Seconds since the last flush (the device is idle now); counted unless ``counted`` is False."""
        now = time.perf_counter()
        seconds, self.mark = now - self.mark, now
        if counted:
            self.tokens += tokens
            self.seconds += seconds
        return seconds
