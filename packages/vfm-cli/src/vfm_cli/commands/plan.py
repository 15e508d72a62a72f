"""``vfm plan CONFIG --gpus N``: predict the best parallel layout for a training config on N GPUs
(vfm_parallel.planner), print the ranked table and write the winner as a ``[parallel]`` block;
``--calibrate`` measures this machine into a profile, ``--measure K`` runs the top K layouts under
torchrun and compares the measured order with the predicted one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Optional

import typer

from vfm_cli.failing import fail


def model_spec(cfg, seq_len: int | None = None):
    """The planner's plain-number description of the config's model (built on the meta device)."""
    import torch

    import vfm_models
    from vfm_cli import recipe
    from vfm_models.flops import count_params, model_flops_per_token
    from vfm_parallel.planner import ModelSpec

    r = recipe.resolve(cfg, probe=cfg.data.source == "shards" and recipe.data_available(cfg))
    with torch.device("meta"):
        model = vfm_models.get_family(cfg.model.family).build(r.mcfg)
    plan = model.parallel_plan()
    tokens = seq_len or recipe.seq_len(cfg, r)
    params = count_params(model)
    full = sum(1 for i in range(plan.num_layers) if "full" in plan.attention_for(i).values())
    return ModelSpec(
        name=f"{cfg.model.family}{'-' + cfg.model.preset if cfg.model.preset else ''}", params=params,
        layers=plan.num_layers, hidden=r.mcfg.hidden, heads=plan.num_heads, kv_heads=plan.num_kv_heads, seq_len=tokens,
        flops_per_token=model_flops_per_token(params, plan.num_layers, r.mcfg.hidden, tokens),
        tp_regions=max(1, sum(1 for style in plan.tp.values() if style == "rowwise")), full_attention_layers=full,
        mlp_ratio=float(getattr(r.mcfg, "mlp_ratio", 4.0) or 4.0),
    )


def default_global_batch(cfg, gpus: int) -> int:
    """Samples per optimizer step the config asks for at ``gpus`` ranks (micro_batch x grad_accum x dp)."""
    sizes = cfg.parallel.resolved(gpus)
    dp = max(sizes["dp_replicate"] * sizes["dp_shard"], 1)
    return cfg.data.micro_batch * cfg.optim.grad_accum * dp


def _overrides(layout, steps: int, out_dir: str) -> list[str]:
    items = layout_sets(layout)
    items += [f"train.steps={steps}",
              "optim.warmup_steps=0", f"train.out_dir={out_dir}", "checkpoint.export=false", "checkpoint.interval=0",
              "logging.tensorboard=false", "logging.loss_curve=false", "logging.progress=false", "logging.interval=1"]
    return items


def layout_sets(layout) -> list[str]:
    """The ``--set`` items that give a config ``layout``: its ``[parallel]`` keys and its batch split."""
    items = [f"parallel.{k}={json.dumps(v)}" for k, v in layout.parallel_table().items()]
    return items + [f"data.micro_batch={layout.micro_batch}", f"optim.grad_accum={layout.grad_accum}"]


def train_command(config: Path, layout, gpus: int, per_node: int, overrides: list[str]) -> str:
    """The shell command that trains ``config`` with ``layout`` (one line, to copy): ``vfm train``
    for one GPU, ``torchrun`` for one node, ``torchrun --nnodes`` (rendezvous to fill in) beyond."""
    import shlex

    if gpus == 1:
        launcher = "vfm train"
    elif gpus <= per_node:
        launcher = f"torchrun --standalone --nproc-per-node {gpus} -m vfm_cli.main train"
    else:
        launcher = (f"torchrun --nnodes {-(-gpus // per_node)} --nproc-per-node {per_node} --rdzv-backend c10d "
                    f"--rdzv-endpoint HOST:29500 -m vfm_cli.main train")
    sets = list(overrides) + layout_sets(layout)
    return f"{launcher} {shlex.quote(str(config))}" + "".join(f" --set {shlex.quote(item)}" for item in sets)


def run_layout(config: Path, overrides: list[str], layout, gpus: int, steps: int, timeout: float) -> float:
    """Train ``steps`` steps of ``layout`` under torchrun; the median tokens/s/GPU after the first step."""
    with tempfile.TemporaryDirectory(prefix="vfm-plan-") as tmp:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus}",
               "-m", "vfm_cli.main", "train", str(config)]
        for item in list(overrides) + _overrides(layout, steps, tmp):
            cmd += ["--set", item]
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        metrics = Path(tmp) / "metrics.jsonl"
        if proc.returncode != 0 or not metrics.is_file():
            lines = (proc.stderr + proc.stdout).strip().splitlines()
            errors = [ln for ln in lines if "Error:" in ln or ln.startswith("error:")]
            raise RuntimeError(f"{layout.short()}: exit {proc.returncode}: {(errors or lines or ['no output'])[-1].strip()}")
        rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
        rates = sorted(r["tokens_per_s_per_device"] for r in rows[1:] if r.get("tokens_per_s_per_device"))
        if not rates:
            raise RuntimeError(f"{layout.short()}: no timed steps in {steps} steps (use --measure-steps >= 3)")
        return rates[len(rates) // 2]


def plan(
    config: Optional[Path] = typer.Argument(None, help="TOML training config (its model and batch are planned for)."),
    gpus: int = typer.Option(0, "--gpus", help="Number of GPUs (ranks) to plan for."),
    gpu: str = typer.Option("h100", "--gpu", help="Hardware profile: h100, h200, a100, cpu, or a profile .toml path."),
    nodes_of: int = typer.Option(0, "--nodes-of", help="GPUs per node (default: the profile's, 8 for the GPUs)."),
    seq_len: int = typer.Option(0, "--seq-len", help="Tokens per sample (default: from the config's latent shape)."),
    global_batch: int = typer.Option(0, "--global-batch", help="Samples per optimizer step (default: the config's micro_batch x grad_accum x dp)."),
    top: int = typer.Option(10, "--top", help="Rows of the ranked table."),
    all_variants: bool = typer.Option(False, "--all-variants", help="List every variant, not the best per (tp, cp, pp)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    # "\\[": rich would take a bare "[parallel]" for a markup tag and print nothing
    write_block: Optional[Path] = typer.Option(None, "--write-block", help="Write the winner's \\[parallel] block to this file."),
    calibrate: bool = typer.Option(False, "--calibrate", help="Measure this machine and write a profile (see --profile-out)."),
    profile_out: Path = typer.Option(Path("vfm-plan-profile.toml"), "--profile-out", help="Where --calibrate writes the profile."),
    measure: int = typer.Option(0, "--measure", help="Run the top K layouts for a few steps under torchrun and rank by measured tokens/s."),
    measure_steps: int = typer.Option(4, "--measure-steps", help="Training steps per measured layout."),
    overrides: Optional[List[str]] = typer.Option(None, "--set", help="Override a config key: --set data.micro_batch=4 (repeatable)."),
) -> None:
    """Predict the best parallel layout (tp, cp, pp, FSDP, checkpointing, micro-batch) for CONFIG on N GPUs."""
    from vfm_parallel.planner import PlanError, ProfileError, SpecError, load_profile

    try:
        hw = load_profile(gpu)
    except ProfileError as exc:
        raise typer.BadParameter(str(exc), param_hint="--gpu") from None
    if calibrate:
        _calibrate(hw, profile_out)
        if config is None:
            return
        hw = load_profile(profile_out)
    if config is None:
        raise typer.BadParameter("give a training config (or --calibrate alone)", param_hint="CONFIG")
    if gpus < 1:
        raise typer.BadParameter(f"must be >= 1, got {gpus}", param_hint="--gpus")
    for name, value in (("--nodes-of", nodes_of), ("--seq-len", seq_len), ("--global-batch", global_batch), ("--measure", measure)):
        if value < 0:
            raise typer.BadParameter(f"must be >= 0, got {value}", param_hint=name)
    if top < 1:
        raise typer.BadParameter(f"must be >= 1, got {top}", param_hint="--top")
    from vfm_parallel.planner import format_table, parallel_block, to_json
    from vfm_parallel.planner import plan as make_plan
    from vfm_parallel.trainer import config as config_mod

    try:
        cfg = config_mod.load(config, list(overrides or []))
        spec = model_spec(cfg, seq_len or None)
        batch = global_batch or default_global_batch(cfg, gpus)
        options = {"gpus_per_node": nodes_of} if nodes_of else {}
        result = make_plan(spec, gpus, hw, global_batch=batch, ema=cfg.ema.enabled, **options)
    except (config_mod.ConfigError, SpecError, PlanError) as exc:
        fail(exc)
    if not result.ranked:
        typer.echo(format_table(result, top=top, all_variants=all_variants), err=True)
        typer.echo(f"error: no layout of {gpus} x {hw.name} fits {spec.name} at {spec.seq_len} tokens", err=True)
        raise typer.Exit(1)
    typer.echo(to_json(result, top) if as_json else format_table(result, top=top, all_variants=all_variants))
    if not as_json:
        typer.echo(f"train the best: {train_command(config, result.best.layout, gpus, nodes_of or hw.gpus_per_node, overrides or [])}")
    if write_block is not None:
        write_block.write_text(parallel_block(result.best))
        typer.echo(f"wrote the [parallel] block of {result.best.layout.short()} to {write_block}", err=as_json)
    if measure:
        _measure(result, config, list(overrides or []), gpus, measure, measure_steps, all_variants)


def _calibrate(hw, out: Path) -> None:
    from vfm_parallel.planner.calibrate import calibrate as run
    from vfm_parallel.planner.hardware import to_toml

    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # under torchrun: measure the collectives too
        import torch

        from vfm_parallel.process_group import ensure_process_group

        ensure_process_group("cuda" if torch.cuda.is_available() else "cpu")
    profile, measured = run(hw)
    rank = int(os.environ.get("RANK", "0"))
    if rank == 0:
        out.write_text(to_toml(profile, "written by vfm plan --calibrate"))
        typer.echo("measured: " + ", ".join(f"{k} {v:.4g}" for k, v in measured.items()))
        typer.echo(f"wrote profile {profile.name} to {out}")


def _measure(result, config: Path, overrides: list[str], gpus: int, k: int, steps: int, all_variants: bool) -> None:
    from vfm_parallel.planner.measure import measure as run_all

    pool = result.ranked if all_variants else result.distinct()
    chosen = pool[:k]
    typer.echo(f"measuring {len(chosen)} layouts for {steps} steps each under torchrun ({gpus} processes)")
    measured, rho = run_all(chosen, lambda p: run_layout(config, overrides, p.layout, gpus, steps, timeout=600))
    predicted_rank = {id(p): i for i, p in enumerate(chosen, 1)}
    typer.echo(f"{'measured':>8}  {'predicted':>9}  {'tokens/s/GPU measured':>21}  {'predicted':>9}  layout")
    for i, m in enumerate(measured, 1):
        rate = f"{m.tokens_per_s_per_gpu:,.1f}" if not m.error else f"failed: {m.error}"
        typer.echo(f"{i:>8}  {predicted_rank[id(m.prediction)]:>9}  {rate:>21}  {m.prediction.tokens_per_s_per_gpu:>9,.1f}  {m.prediction.layout.short()}")
    typer.echo(f"spearman(predicted, measured) = {rho:.3f}" if rho is not None else "spearman: fewer than two layouts ran")


def register(app: typer.Typer) -> None:
    app.command("plan", no_args_is_help=True)(plan)
