"""Attention kernels on one GPU: each SDPA backend (and flash-attn / TransformerEngine when
installed) for vfm's shapes, forward and forward + backward, with TFLOP/s and the error against
SDPA's math kernel in fp32.

    python benchmarks/gpu_attention.py                     # 12 heads of 128, 8k and 32k tokens, bf16

This is the measurement behind ``vfm_models.blocks.backends``' automatic choice.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SDPA = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
        "cudnn": SDPBackend.CUDNN_ATTENTION}


def bench(fn, iters: int = 20) -> float:
    """Median milliseconds of ``fn`` timed with CUDA events."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=[8190, 32760])
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=128)
    args = parser.parse_args()
    from vfm_models.blocks import backends

    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}; "
          f"vfm picks {backends.select_backend(torch.device('cuda'), torch.bfloat16)!r} by default")
    print(f"{'tokens':>6} {'backend':>10} {'fwd ms':>8} {'fwd TF/s':>8} {'f+b ms':>8} {'f+b TF/s':>8} {'rel err':>8}")
    for s in args.tokens:
        shape = (1, args.heads, s, args.head_dim)
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        with sdpa_kernel(SDPBackend.MATH):
            ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float()) if s <= 8192 else None
        fwd_flops = 4 * s * s * args.heads * args.head_dim
        candidates = {name: (lambda b=b: _sdpa(q, k, v, b)) for name, b in SDPA.items()}
        for name in ("flash-attn", "te"):
            key = {"flash-attn": "flash", "te": "te"}[name]
            if backends.installed().get(key):
                candidates[name] = lambda key=key: backends.attend(q, k, v, backend=key)
        for name, fn in candidates.items():
            try:
                out = fn()
            except RuntimeError as exc:
                print(f"{s:>6} {name:>10} unavailable: {str(exc).splitlines()[0][:60]}")
                continue
            grad = torch.randn_like(out)
            fwd = bench(lambda: fn())
            both = bench(lambda: torch.autograd.grad(fn(), (q, k, v), grad))
            err = float((out.detach().float() - ref).norm() / ref.norm()) if ref is not None else float("nan")
            print(f"{s:>6} {name:>10} {fwd:>8.2f} {fwd_flops / fwd / 1e9:>8.0f} {both:>8.2f} "
                  f"{3.5 * fwd_flops / both / 1e9:>8.0f} {err:>8.1e}", flush=True)
        cross_rows(s, 512, args.heads, args.head_dim)


def cross_rows(tokens: int, text_len: int, heads: int, head_dim: int) -> None:
    """Cross-attention to text (S queries x L keys): no mask, an all-true padding mask, a real one."""
    from vfm_models.blocks import backends

    q = torch.randn(1, heads, tokens, head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(1, heads, text_len, head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    full = torch.ones(1, text_len, dtype=torch.bool, device="cuda")
    half = full.clone()
    half[:, text_len // 2:] = False
    flops = 4 * tokens * text_len * heads * head_dim
    for name, mask in (("none", None), ("all-true", full), ("half-padded", half)):
        fn = lambda mask=mask: backends.attend(q, k, v, key_padding_mask=mask)  # noqa: E731
        out = fn()
        grad = torch.randn_like(out)
        fwd = bench(fn)
        both = bench(lambda: torch.autograd.grad(fn(), (q, k, v), grad))
        print(f"cross {tokens}x{text_len} mask {name:>11}: fwd {fwd:.3f} ms ({flops / fwd / 1e9:.0f} TF/s), "
              f"f+b {both:.3f} ms ({3.5 * flops / both / 1e9:.0f} TF/s)", flush=True)


def _sdpa(q, k, v, backend):
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v)


if __name__ == "__main__":
    main()
