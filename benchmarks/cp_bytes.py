"""Bytes each rank moves per attention layer (forward + backward) under cp-ring, cp-ulysses and
cp-hybrid on a small ST-DiT, at cp = 2 and 4 (CPU, gloo), next to seed table 2's shape, and the
step time as a ratio against the single-process step run in the same worker.

    python benchmarks/cp_bytes.py
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

STRATEGIES = ("cp-ring", "cp-ulysses", "cp-hybrid")
B, C, D, HEADS = 2, 4, 64, 4
GRIDS = ((8, 8, 8), (6, 8, 8))  # (t, h, w) after patch (1, 2, 2); t=6 is not divisible by cp=4
KINDS = ("spatial", "temporal", "full", "cross")
LAYERS = {"spatial": 1, "temporal": 2, "full": 1, "cross": 2}  # depth 2, block 1 has full attention


def _model():
    import torch
    import vfm_models

    torch.manual_seed(0)
    model = vfm_models.get_family("stdit").create(
        "tiny", hidden=D, num_heads=HEADS, depth=2, text_dim=16, in_channels=C, patch=(1, 2, 2),
        pos_embed="rope", full_attention_blocks=(1,),
    )
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.05)
    return model


def bench(rank, world, steps):
    import copy

    import torch
    from torch.distributed.device_mesh import init_device_mesh

    from vfm_parallel import comm_stats, grad_sync
    from vfm_parallel.strategy import get_strategy

    warnings.filterwarnings("ignore")
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("cp",))
    reference = _model()
    rows = []
    for t, h, w in GRIDS:
        x = torch.randn(B, C, t, 2 * h, 2 * w)
        tt = torch.rand(B)
        cond = {"text": torch.randn(B, 5, 16), "text_mask": torch.ones(B, 5, dtype=torch.bool)}

        def step(m):
            m.zero_grad()
            ((m(x, tt, cond) - x) ** 2).mean().backward()
            grad_sync.run(m)

        def timed(m):
            step(m)  # warm-up
            start = time.perf_counter()
            for _ in range(steps):
                step(m)
            return (time.perf_counter() - start) / steps

        single = timed(copy.deepcopy(reference))
        for name in STRATEGIES:
            model = copy.deepcopy(reference)
            get_strategy(name).apply(model, mesh, model.parallel_plan())
            comm_stats.reset()
            step(model)
            stats = comm_stats.snapshot()
            per_layer = {}
            for kind in (*KINDS, "sequence", "gradients"):
                total = sum(s["by_layer"].get(f"cp.{kind}", 0) for s in stats.values())
                per_layer[kind] = total // LAYERS.get(kind, 1)
            rows.append(((t, h, w), name, per_layer, timed(model) / single))
    return rows


def table2(kind, grid, cp):
    """Seed table 2's shape for one layer (one all-to-all buffer, or one ring hop of K), in bytes."""
    t, h, w = grid
    shape = {
        "temporal": (B * h * w // cp) * t * D,
        "spatial": (B * t // cp) * h * w * D,
        "full": B * (h * w * t // cp) * D,
        "cross": 0,
    }[kind]
    return 4 * shape


def main(steps: int = 2) -> None:
    from tests.gloo import spawn

    print(f"stdit hidden={D} heads={HEADS} depth=2 (block 1 full attention), batch {B}; KiB per rank per layer, fwd+bwd")
    header = f"{'cp':>3} {'grid t,h,w':>10} {'layer':>9} {'table 2':>9} " + " ".join(f"{s:>11}" for s in STRATEGIES)
    print(header)
    print("-" * len(header))
    for cp in (2, 4):
        rows = spawn(bench, cp, steps)[0]
        for grid in GRIDS:
            by = {name: (per_layer, ratio) for g, name, per_layer, ratio in rows if g == grid}
            for kind in (*KINDS, "sequence", "gradients"):
                shape = f"{table2(kind, grid, cp) / 1024:9.1f}" if kind in KINDS else f"{'':>9}"
                cells = " ".join(f"{by[s][0][kind] / 1024:11.1f}" for s in STRATEGIES)
                print(f"{cp:>3} {','.join(map(str, grid)):>10} {kind:>9} {shape} {cells}")
            ratios = " ".join(f"{by[s][1]:10.2f}x" for s in STRATEGIES)
            print(f"{cp:>3} {','.join(map(str, grid)):>10} {'step time':>9} {'vs 1 proc':>9} {ratios}")
        print()
    print("table 2 = bytes of one shape: the hybrid moves 8 such shapes per spatial/temporal layer (q, k, v, out")
    print("forward; the same backward) and the ring 2 per hop (K, V; dK, dV backward). spatial moves nothing")
    print("when t % cp == 0: a t-major shard already holds whole frames.")


if __name__ == "__main__":
    main()
