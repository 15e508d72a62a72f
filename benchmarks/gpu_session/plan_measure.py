"""Prediction vs measurement for the layouts ``vfm plan`` ranks, one row printed (and written to
``--json``) as each layout finishes: what ``vfm plan CONFIG --measure K --all-variants`` does, with
the same functions (the planner, ``run_layout`` under torchrun, Spearman's rho), but a run stopped
by a time limit keeps the layouts it measured.

    python benchmarks/gpu_session/plan_measure.py benchmarks/gpu_session/plan-1gpu.toml \\
        --gpu my-h100.toml --gpus 1 --measure 7 --steps 5 --json plan_measure.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", type=Path)
    parser.add_argument("--gpu", default="h100", help="profile name or .toml (e.g. from vfm plan --calibrate)")
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--measure", type=int, default=4, help="layouts to run, best predicted first (every variant)")
    parser.add_argument("--steps", type=int, default=5, help="training steps per layout (the first is not timed)")
    parser.add_argument("--layout-timeout", type=float, default=180.0, help="seconds one layout may take")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="config override, repeatable")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from vfm_cli.commands.plan import default_global_batch, model_spec, run_layout
    from vfm_parallel.planner import format_table, load_profile, plan
    from vfm_parallel.planner.measure import spearman
    from vfm_parallel.trainer import config as config_mod

    hw = load_profile(args.gpu)
    cfg = config_mod.load(args.config, list(args.overrides))
    spec = model_spec(cfg)
    result = plan(spec, args.gpus, hw, global_batch=default_global_batch(cfg, args.gpus)[0], ema=cfg.ema.enabled)
    print(format_table(result, top=max(10, args.measure), all_variants=True), flush=True)
    chosen = result.ranked[: args.measure]
    print(f"\nmeasuring {len(chosen)} layouts, {args.steps} steps each, under torchrun ({args.gpus} processes); "
          f"profile {hw.name}", flush=True)
    print(f"{'predicted':>9}  {'predicted tok/s/GPU':>19}  {'measured tok/s/GPU':>18}  {'measured/predicted':>18}  layout",
          flush=True)
    rows = []
    for rank, p in enumerate(chosen, 1):
        t0 = time.perf_counter()
        try:
            rate, error = run_layout(args.config, list(args.overrides), p.layout, args.gpus, args.steps,
                                     timeout=args.layout_timeout), ""
        except Exception as exc:  # noqa: BLE001 - one broken layout must not hide the others
            rate, error = 0.0, (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
        row = dict(predicted_rank=rank, layout=p.layout.short(), predicted=p.tokens_per_s_per_gpu, measured=rate,
                   error=error, seconds=round(time.perf_counter() - t0, 1), predicted_gib=round(p.memory.total / 2**30, 2))
        rows.append(row)
        shown = f"{rate:,.1f}" if not error else f"failed: {error}"[:60]
        ratio = f"{rate / p.tokens_per_s_per_gpu:.2f}" if rate and p.tokens_per_s_per_gpu else "-"
        print(f"{rank:>9}  {p.tokens_per_s_per_gpu:>19,.1f}  {shown:>18}  {ratio:>18}  {p.layout.short()}", flush=True)
        write(args, hw, spec, rows)
    ok = [r for r in rows if not r["error"]]
    rho = spearman([r["predicted"] for r in ok], [r["measured"] for r in ok]) if len(ok) >= 2 else None
    order = sorted(ok, key=lambda r: -r["measured"])
    print("measured order: " + ", ".join(f"{r['layout']} (predicted #{r['predicted_rank']})" for r in order))
    print(f"spearman(predicted, measured) = {rho:.3f} over {len(ok)} layouts" if rho is not None
          else "spearman: fewer than two layouts ran")
    write(args, hw, spec, rows, rho)


def write(args, hw, spec, rows, rho=None) -> None:
    if args.json:
        args.json.write_text(json.dumps(dict(config=str(args.config), overrides=args.overrides, profile=hw.name, gpus=args.gpus,
                                             model=spec.name, params=spec.params, seq_len=spec.seq_len, steps=args.steps,
                                             time=time.strftime("%Y-%m-%d %H:%M:%S"), rows=rows, spearman=rho), indent=1))


if __name__ == "__main__":
    main()
