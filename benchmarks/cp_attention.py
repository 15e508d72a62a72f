"""Seconds per forward + backward of one attention layer under context parallelism: ring (P2P) and
all-to-all (Ulysses) over cp gloo processes (CPU), next to the whole sequence in one process, with
the ratios taken in the same run. ``--profile`` prints rank 0's torch profiler table for the ring.

    python benchmarks/cp_attention.py [--cp 2] [--seq 2048] [--heads 8] [--head-dim 64] [--kind full]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _grid(seq: int) -> tuple[int, int, int]:
    """A (T', H', W') of ``seq`` tokens: 16 frames of seq/16 tokens (spatial/temporal need a grid)."""
    t = 16 if seq % 16 == 0 else 1
    return (t, 1, seq // t)


def bench(rank, world, args):
    import torch
    import torch.distributed as dist
    from vfm_models.blocks.attention import AttentionCore

    from vfm_parallel.cp import ContextParallelCore

    warnings.filterwarnings("ignore")
    gen = torch.Generator().manual_seed(0)
    b, h, s, dh = 1, args.heads, args.seq, args.head_dim
    q, k, v = (torch.randn(b, h, s, dh, generator=gen) for _ in range(3))
    grad = torch.randn(b, h, s, dh, generator=gen)
    grid = _grid(s)
    inner = AttentionCore(args.kind)
    n = s // world
    part = slice(rank * n, (rank + 1) * n)

    def timed(core, qq, kk, vv, gg):
        qq, kk, vv = (x.clone().requires_grad_() for x in (qq, kk, vv))

        def step():
            core(qq, kk, vv, grid=grid).backward(gg)

        step()  # warm-up
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        dist.barrier()
        return (time.perf_counter() - start) / args.steps

    results = {"1 process": timed(inner, q, k, v, grad)}
    local = tuple(x[:, :, part] for x in (q, k, v, grad))
    for method in ("ring", "ulysses"):
        core = ContextParallelCore(inner, args.kind, dist.group.WORLD, method)
        results[f"cp-{method}"] = timed(core, *local)
    table = None
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        core = ContextParallelCore(inner, args.kind, dist.group.WORLD, "ring")
        qq, kk, vv = (x.clone().requires_grad_() for x in local[:3])
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            core(qq, kk, vv, grid=grid).backward(local[3])
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18)
    return results, table


def main() -> None:
    from tests.gloo import spawn

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cp", type=int, default=2)
    p.add_argument("--seq", type=int, default=2048, help="tokens of the whole sequence")
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--kind", default="full", choices=("full", "spatial", "temporal"))
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    if min(args.cp, args.seq, args.heads, args.head_dim, args.steps) < 1 or args.seq % args.cp or args.heads % args.cp:
        p.error(f"need positive sizes, --seq a multiple of --cp (each rank holds seq/cp tokens) and --heads a multiple "
                f"of --cp (Ulysses splits heads); got --cp {args.cp} --seq {args.seq} --heads {args.heads}")

    results, table = spawn(bench, args.cp, args)[0]
    print(f"{args.kind} attention, batch 1, {args.heads} heads x {args.head_dim}, {args.seq} tokens, "
          f"cp={args.cp} (gloo, 1 thread per process), fp32; seconds per forward + backward (rank 0)")
    single = results["1 process"]
    for name, seconds in results.items():
        print(f"{name:>10} {seconds:8.3f} s {seconds / single:6.2f}x 1 process "
              f"{seconds / results['cp-ulysses']:6.2f}x cp-ulysses")
    if table:
        print(table)


if __name__ == "__main__":
    main()
