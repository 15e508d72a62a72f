"""Per-step time and bytes communicated per rank for each 2-process layout of a small DiT (CPU,
gloo), as ratios against the single-process step run in the same worker.

    python benchmarks/parallel_layouts.py [--steps 5]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def bench(rank, world, steps):
    import torch.nn.functional as F

    from tests.parallel.scenarios import make_model, parallel_step
    from tests.parallel.toy_model import ToyDiT, toy_batch
    from vfm_parallel import ParallelDims, comm_stats, parallelize

    warnings.filterwarnings("ignore")
    kwargs = dict(dim=128, depth=4, heads=8, kv_heads=4)
    batch = toy_batch(batch=8, frames=4, size=8)

    def timed(fn):
        fn()  # warm-up
        start = time.perf_counter()
        for _ in range(steps):
            fn()
        return (time.perf_counter() - start) / steps

    single = make_model(ToyDiT, **kwargs)
    x, t, cond, target = batch

    def single_step():
        single.zero_grad()
        F.mse_loss(single(x, t, cond), target).backward()

    rows = {"single": (timed(single_step), 0, {})}
    pp = {"pp": {"schedule": "1f1b", "microbatches": 2}}
    for name, dims, strategies, options in [
        ("ddp2", ParallelDims(dp_shard=2), ["ddp"], None),
        ("fsdp2", ParallelDims(dp_shard=2), ["fsdp"], None),
        ("tp2", ParallelDims(tp=2), ["tp"], None),
        ("tp2+sp", ParallelDims(tp=2), ["sp"], None),
        ("pp2-1f1b", ParallelDims(pp=2), ["pp"], pp),
        ("fsdp2+ac", ParallelDims(dp_shard=2), ["fsdp", "ac"], None),
    ]:
        pm = parallelize(make_model(ToyDiT, **kwargs), dims, strategies, options=options)

        def step():
            pm.model.zero_grad()
            parallel_step(pm, batch)

        seconds = timed(step)
        comm_stats.reset()
        step()
        rows[name] = (seconds, comm_stats.total(), {k: v["total"] for k, v in comm_stats.snapshot().items()})
    return rows


if __name__ == "__main__":
    from tests.gloo import spawn

    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    steps = parser.parse_args().steps
    rows = spawn(bench, 2, steps, timeout=900)[0]
    base = rows["single"][0]
    print(f"{'layout':<12} {'s/step':>8} {'vs single':>10} {'recorded bytes/rank':>20}  by kind")
    for name, (seconds, nbytes, kinds) in rows.items():
        print(f"{name:<12} {seconds:8.4f} {seconds / base:10.2f} {nbytes:20d}  {kinds}")
    print("(recorded bytes: collectives vfm-parallel issues itself; DTensor/FSDP/DDP/pipelining traffic is not counted)")
