"""Trainer throughput on CPU: tokens/s and MFU of the tiny config, and what EMA, grad accumulation
and checkpointing cost, as ratios against the plain run in the same process.

    python benchmarks/train_throughput.py [--steps 30]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from vfm_cli import recipe
from vfm_parallel.trainer import config as config_mod
from vfm_parallel.trainer import train
from vfm_parallel.trainer.mfu import measured_matmul_tflops

ROOT = Path(__file__).resolve().parents[1]


def run(name: str, overrides: list[str], steps: int, peak: float) -> dict:
    with tempfile.TemporaryDirectory() as out:
        items = [f"train.steps={steps}", "optim.warmup_steps=1", f"train.out_dir={out}", "logging.progress=false",
                 "logging.tensorboard=false", "logging.loss_curve=false", "checkpoint.export=false",
                 "checkpoint.interval=0", f"logging.peak_tflops={peak}", *overrides]
        cfg = config_mod.load(ROOT / "configs" / "tiny.toml", items, 1)
        start = time.perf_counter()
        result = train(cfg, recipe.parts_builder(recipe.validate(cfg)))
        wall = time.perf_counter() - start
    losses = [result.losses[s] for s in sorted(result.losses)]
    return {"name": name, "tokens_per_s": result.mean_tokens_per_s, "mfu": result.mean_mfu, "wall_s": wall,
            "loss0": losses[0], "loss1": losses[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(1)
    peak = measured_matmul_tflops()
    rows = [
        run("tiny (EMA on, accum 1)", [], args.steps, peak),
        run("EMA off", ["ema.enabled=false"], args.steps, peak),
        run("grad_accum 2 (2x batch)", ["optim.grad_accum=2"], args.steps, peak),
        run("checkpoint every 5 steps", ["checkpoint.interval=5"], args.steps, peak),
        run("hidden 128 (4x FLOPs/token)", ["model.options.hidden=128"], args.steps, peak),
    ]
    base = rows[0]["tokens_per_s"]
    print(f"CPU, 1 thread, measured fp32 matmul peak {peak * 1e3:.1f} GFLOP/s; {args.steps} steps; MFU = 6N+12LhS FLOPs/token x tokens/s / peak")
    print(f"{'run':32s} {'tokens/s':>10s} {'vs base':>8s} {'MFU':>8s} {'wall s':>7s} {'loss first->last':>18s}")
    for r in rows:
        print(f"{r['name']:32s} {r['tokens_per_s']:10.0f} {r['tokens_per_s'] / base:8.2f} {r['mfu']:8.2%} {r['wall_s']:7.1f} "
              f"{r['loss0']:8.4f}->{r['loss1']:.4f}")


if __name__ == "__main__":
    main()
