"""Attention kernels on one GPU: each SDPA backend (and flash-attn / TransformerEngine when
installed) for vfm's shapes, forward and forward + backward, with TFLOP/s and the error against
SDPA's math kernel in fp32.

    python benchmarks/gpu_attention.py                     # 12 heads of 128, 8k and 32k tokens, bf16
    python benchmarks/gpu_attention.py --json attention.json
    python benchmarks/gpu_attention.py --smoke             # any machine: toy sizes on the CPU

This is the measurement behind ``vfm_models.blocks.backends``' automatic choice. ``--smoke`` runs
the same loop on the CPU at toy sizes (vfm's default kernel and SDPA's math kernel; the CUDA-only
kernels are listed as skipped): a check of the code paths, not a figure.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SDPA = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION}
ROWS: list[dict] = []


def bench(fn, device: torch.device, iters: int = 20) -> float:
    """Median milliseconds of ``fn`` (CUDA events on a GPU, the wall clock on the CPU)."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(iters):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append(1e3 * (time.perf_counter() - t0))
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=[8190, 32760])
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--text-len", type=int, default=512)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--smoke", action="store_true", help="toy sizes on the CPU: checks the code paths")
    args = parser.parse_args()
    from vfm_models.blocks import backends

    if args.smoke:
        device = torch.device("cpu")
        args.tokens, args.heads, args.head_dim, args.text_len, args.iters = [256], 2, 32, 16, 2
        print("smoke: toy sizes on the CPU; the figures are no measurement")
    elif not torch.cuda.is_available():
        raise SystemExit("benchmarks/gpu_attention.py needs a CUDA GPU (or --smoke for a CPU check of the code paths)")
    else:
        device = torch.device("cuda")
    name = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    default = backends.select_backend(device, torch.bfloat16)
    print(f"{name}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}; vfm picks {default!r} by default")
    print(f"{'tokens':>6} {'backend':>10} {'fwd ms':>8} {'fwd TF/s':>8} {'f+b ms':>8} {'f+b TF/s':>8} {'rel err':>8}")
    for s in args.tokens:
        shape = (1, args.heads, s, args.head_dim)
        q, k, v = (torch.randn(shape, device=device, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        with sdpa_kernel(SDPBackend.MATH), torch.no_grad():
            ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float()) if s <= 8192 else None
        fwd_flops = 4 * s * s * args.heads * args.head_dim
        candidates = {}
        for kernel, b in SDPA.items():
            if device.type == "cuda":
                candidates[kernel] = lambda b=b: _sdpa(q, k, v, b)
            else:
                print(f"{s:>6} {kernel:>10} skipped: a CUDA kernel (no GPU here)")
        if device.type != "cuda":  # the CPU's own kernels: vfm's default and SDPA's math
            candidates["vfm-default"] = lambda: backends.attend(q, k, v)
            candidates["math"] = lambda: _sdpa(q, k, v, SDPBackend.MATH)
        for lib in ("flash-attn", "te"):
            key = {"flash-attn": "flash", "te": "te"}[lib]
            if backends.installed().get(key) and device.type == "cuda":
                candidates[lib] = lambda key=key: backends.attend(q, k, v, backend=key)
        for kernel, fn in candidates.items():
            try:
                out = fn()
            except RuntimeError as exc:
                print(f"{s:>6} {kernel:>10} unavailable: {str(exc).splitlines()[0][:60]}")
                ROWS.append(dict(tokens=s, kernel=kernel, unavailable=str(exc).splitlines()[0][:200]))
                continue
            grad = torch.randn_like(out)
            fwd = bench(lambda: fn(), device, args.iters)
            both = bench(lambda: torch.autograd.grad(fn(), (q, k, v), grad), device, args.iters)
            err = float((out.detach().float() - ref).norm() / ref.norm()) if ref is not None else float("nan")
            print(f"{s:>6} {kernel:>10} {fwd:>8.2f} {fwd_flops / fwd / 1e9:>8.0f} {both:>8.2f} "
                  f"{3.5 * fwd_flops / both / 1e9:>8.0f} {err:>8.1e}", flush=True)
            ROWS.append(dict(tokens=s, kernel=kernel, fwd_ms=fwd, fwd_tflops=fwd_flops / fwd / 1e9, fwd_bwd_ms=both,
                             fwd_bwd_tflops=3.5 * fwd_flops / both / 1e9, rel_err=err if ref is not None else None))
        cross_rows(s, args.text_len, args.heads, args.head_dim, device, args.iters)
    if args.json:
        args.json.write_text(json.dumps(dict(device=name, torch=torch.__version__, cudnn=torch.backends.cudnn.version(),
                                             default=default, heads=args.heads, head_dim=args.head_dim, smoke=args.smoke,
                                             time=time.strftime("%Y-%m-%d %H:%M:%S"), rows=ROWS), indent=1))


def cross_rows(tokens: int, text_len: int, heads: int, head_dim: int, device: torch.device, iters: int) -> None:
    """Cross-attention to text (S queries x L keys): no mask, an all-true padding mask, a real one."""
    from vfm_models.blocks import backends

    q = torch.randn(1, heads, tokens, head_dim, device=device, dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(1, heads, text_len, head_dim, device=device, dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    full = torch.ones(1, text_len, dtype=torch.bool, device=device)
    half = full.clone()
    half[:, text_len // 2:] = False
    flops = 4 * tokens * text_len * heads * head_dim
    for name, mask in (("none", None), ("all-true", full), ("half-padded", half)):
        fn = lambda mask=mask: backends.attend(q, k, v, key_padding_mask=mask)  # noqa: E731
        out = fn()
        grad = torch.randn_like(out)
        fwd = bench(fn, device, iters)
        both = bench(lambda: torch.autograd.grad(fn(), (q, k, v), grad), device, iters)
        print(f"cross {tokens}x{text_len} mask {name:>11}: fwd {fwd:.3f} ms ({flops / fwd / 1e9:.0f} TF/s), "
              f"f+b {both:.3f} ms ({3.5 * flops / both / 1e9:.0f} TF/s)", flush=True)
        ROWS.append(dict(tokens=tokens, kernel=f"cross x{text_len} mask {name}", fwd_ms=fwd, fwd_bwd_ms=both))


def _sdpa(q, k, v, backend):
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v)


if __name__ == "__main__":
    main()
