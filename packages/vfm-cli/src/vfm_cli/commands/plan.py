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

#: the hardware profile `vfm plan` assumes without --gpu (a suggested command repeats any other)
DEFAULT_GPU = "h100"


def model_spec(cfg, seq_len: int | None = None):
    """The planner's plain-number description of the config's model (built on the meta device), read
    off the family: its attention kinds (full, spatial, temporal, cross), MLP kind and GQA ratio give
    the attention FLOPs and the activation bytes per block, not dit-cross's figures."""
    import torch

    import vfm_models
    from vfm_cli import recipe
    from vfm_cli.recipe.resolution import grid_of
    from vfm_models.blocks.mlp import ffn_dim
    from vfm_models.families.plan import parallel_plan_of
    from vfm_models.flops import count_params
    from vfm_parallel.planner import ModelSpec, block_activation_bytes

    r = recipe.resolve(cfg, probe=cfg.data.source == "shards" and recipe.data_available(cfg))
    with torch.device("meta"):
        model = vfm_models.get_family(cfg.model.family).build(r.mcfg)
    plan = parallel_plan_of(model, cfg.model.family)  # a plugin's model without one: ParallelPlanMissingError naming its family
    tokens = seq_len or recipe.seq_len(cfg, r)
    _, h, w = grid_of(r.latent_shape, r.mcfg)
    frames = tokens / (h * w)  # --seq-len: a longer (or shorter) clip of the same frame size
    params = count_params(model)
    hidden = r.mcfg.hidden
    # per-token attention products per block, forward + backward (12 h x the keys a query sees);
    # cross-attention is left out as the 6N + 12LhS convention leaves it out
    keys = {"full": tokens, "spatial": h * w, "temporal": frames}
    kinds = [list(plan.attention_for(i).values()) for i in range(plan.num_layers)]
    attention = sum(12.0 * hidden * keys[k] for block in kinds for k in block if k != "cross")
    # the self-attentions CP moves keys/values (ring) or heads (Ulysses) for: vfm's ring and Ulysses
    # cores serve spatial and temporal attention too (stdit: two per block), not only full attention
    cp_attentions = sum(1 for block in kinds for k in block if k != "cross")
    first = kinds[0] if kinds else []
    selfs, crosses = sum(1 for k in first if k != "cross"), sum(1 for k in first if k == "cross")
    mlp = getattr(r.mcfg, "mlp", "gelu") or "gelu"
    ratio = float(getattr(r.mcfg, "mlp_ratio", 4.0) or 4.0)
    heads, kv_heads = plan.num_heads, plan.num_kv_heads or plan.num_heads
    return ModelSpec(
        name=f"{cfg.model.family}{'-' + cfg.model.preset if cfg.model.preset else ''}", params=params,
        layers=plan.num_layers, hidden=hidden, heads=heads, kv_heads=kv_heads, seq_len=tokens,
        flops_per_token=6.0 * params + attention, attention_flops=attention,
        tp_regions=max(1, sum(1 for style in plan.tp.values() if style == "rowwise")), full_attention_layers=cp_attentions,
        mlp_ratio=ratio, self_attentions=max(1, selfs),
        act_bytes_per_token=block_activation_bytes(self_attentions=selfs, cross_attentions=crosses, mlp=mlp,
                                                   mlp_inner=ffn_dim(hidden, ratio, mlp) / hidden, kv_share=kv_heads / heads,
                                                   qk_norm=bool(getattr(r.mcfg, "qk_norm", False)),
                                                   rope=getattr(r.mcfg, "pos_embed", "") == "rope"),
    )


def default_global_batch(cfg, gpus: int) -> tuple[int, str]:
    """Samples per optimizer step the config asks for at ``gpus`` ranks (micro_batch x grad_accum x dp),
    and where the figure comes from. Where the config's own model-parallel sizes do not divide
    ``gpus`` (tp 2 on 7 GPUs) its dp is not defined: micro_batch x grad_accum x gpus, so that every
    data-parallel degree splits it."""
    p, mb, ga = cfg.parallel, cfg.data.micro_batch, cfg.optim.grad_accum
    fixed = p.pp * p.dp_replicate * p.cp * p.tp * (p.dp_shard if p.dp_shard != -1 else 1)
    if gpus % fixed:
        return mb * ga * gpus, (f"micro_batch {mb} x grad_accum {ga} x {gpus} GPUs: the config's [parallel] sizes "
                                f"({fixed} ranks) do not divide {gpus}; --global-batch to choose")
    sizes = p.resolved(gpus)
    dp = max(sizes["dp_replicate"] * sizes["dp_shard"], 1)
    return mb * ga * dp, f"the config's micro_batch {mb} x grad_accum {ga} x dp {dp}"


def _overrides(steps: int, out_dir: str) -> list[str]:
    return [f"train.steps={steps}", "optim.warmup_steps=0", f"train.out_dir={out_dir}", "checkpoint.export=false",
            "checkpoint.interval=0", "logging.tensorboard=false", "logging.loss_curve=false", "logging.progress=false",
            "logging.interval=1"]


def layout_sets(layout) -> list[str]:
    """The ``--set`` items that give a config ``layout``: its ``[parallel]`` keys and its batch split."""
    items = [f"parallel.{k}={json.dumps(v)}" for k, v in layout.parallel_table().items()]
    return items + [f"data.micro_batch={layout.micro_batch}", f"optim.grad_accum={layout.grad_accum}"]


def with_layout(overrides: list[str], layout) -> list[str]:
    """The user's ``--set`` items, less those the layout sets again, then the layout's."""
    sets = layout_sets(layout)
    mine = {item.split("=", 1)[0].strip() for item in sets}
    return [item for item in overrides if item.split("=", 1)[0].strip() not in mine] + sets


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
    sets = with_layout(list(overrides), layout)
    return f"{launcher} {shlex.quote(str(config))}" + "".join(f" --set {shlex.quote(item)}" for item in sets)


def run_layout(config: Path, overrides: list[str], layout, gpus: int, steps: int, timeout: float) -> float:
    """Train ``steps`` steps of ``layout`` under torchrun; the median tokens/s/GPU after the first step.
    Ctrl-C or the timeout stops torchrun and its workers (they run in sessions of their own, so a
    killed torchrun would leave them training), then raises."""
    with tempfile.TemporaryDirectory(prefix="vfm-plan-") as tmp:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus}",
               "-m", "vfm_cli.main", "train", str(config)]
        for item in with_layout(list(overrides), layout) + _overrides(steps, tmp):
            cmd += ["--set", item]
        env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
        log = Path(tmp) / "torchrun.log"
        with open(log, "w+") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                stop_tree(proc)
                raise RuntimeError(f"{layout.short()}: no result in {timeout:.0f} s (stopped)") from None
            except BaseException:  # Ctrl-C: no worker may outlive vfm plan
                stop_tree(proc)
                raise
            out.seek(0)
            output = out.read()
        metrics = Path(tmp) / "metrics.jsonl"
        if proc.returncode != 0 or not metrics.is_file():
            fd, kept = tempfile.mkstemp(prefix="vfm-plan-measure-", suffix=".log")  # the run's folder goes
            with os.fdopen(fd, "w") as f:
                f.write(output)
            raise RuntimeError(f"{layout.short()}: exit {proc.returncode}: {failure_line(output)} (log: {kept})")
        rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
        rates = sorted(r["tokens_per_s_per_device"] for r in rows[1:] if r.get("tokens_per_s_per_device"))
        if not rates:
            raise RuntimeError(f"{layout.short()}: no timed steps in {steps} steps (use --measure-steps >= 3)")
        return rates[len(rates) // 2]


def failure_line(output: str) -> str:
    """The line of a failed torchrun's output that says why: the worker torchrun names as the root
    cause when a signal ended it (the out-of-memory killer's SIGKILL: its peers' lost-connection errors
    are consequences), else vfm's own ``error: ...``, else the last exception line of a worker (not
    torchrun's ChildFailedError, which only says that one failed)."""
    import re
    import signal

    root = output.rsplit("Root Cause", 1)[-1] if "Root Cause" in output else ""
    killed = re.search(r"rank\s*:\s*(\d+).*?exitcode\s*:\s*-(\d+)", root, re.S)
    if killed:
        rank, signum = int(killed.group(1)), int(killed.group(2))
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        oom = (" (what the out-of-memory killer does: the layout may need more memory than this machine has free)"
               if signum == signal.SIGKILL else "")
        return f"rank {rank} was killed by {name}{oom}"
    lines = [ln.strip() for ln in output.strip().splitlines() if ln.strip()]
    ours = [ln for ln in lines if ln.startswith("error:")]
    if ours:
        return ours[-1]
    raised = [ln for ln in lines if re.match(r"^(\[rank\d+\]:\s*)?[\w.]*(Error|Exception|Interrupt)\b:?", ln)
              and "ChildFailedError" not in ln]
    return (raised or lines or ["no output"])[-1]


def _started(pid: int) -> str:
    """The start time of process ``pid`` (/proc/PID/stat field 22): tells a reused pid apart."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def _descendants(pid: int) -> list[tuple[int, str]]:
    """Every process below ``pid``, with its start time (Linux /proc; [] elsewhere)."""
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            children = [int(c) for c in Path(f"/proc/{parent}/task/{parent}/children").read_text().split()]
        except OSError:
            continue
        out += [(c, _started(c)) for c in children]
        todo += children
    return out


def stop_tree(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM torchrun (it passes it on to its workers and waits for them), then SIGKILL whatever of
    the tree is left after ``grace`` seconds. Only this process and its descendants are signalled."""
    import signal

    tree = _descendants(proc.pid)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for pid, started in tree:
        if started and _started(pid) == started:  # still the worker it was, not a reused pid
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def plan(
    config: Optional[Path] = typer.Argument(None, help="TOML training config (its model and batch are planned for)."),
    gpus: int = typer.Option(0, "--gpus", show_default=False, help="Number of GPUs (ranks) to plan for: up to one node, or whole nodes (see --nodes-of)."),
    gpu: str = typer.Option(DEFAULT_GPU, "--gpu", help="Hardware profile: h100, h200, a100, cpu, or a profile .toml path."),
    nodes_of: int = typer.Option(0, "--nodes-of", show_default=False, help="GPUs per node (default: the profile's, 8 for the GPUs)."),
    seq_len: int = typer.Option(0, "--seq-len", show_default=False, help="Tokens per sample (default: from the config's latent shape)."),
    global_batch: int = typer.Option(0, "--global-batch", show_default=False, help="Samples per optimizer step (default: the config's micro_batch x grad_accum x dp; x GPUs where the config's mesh does not divide them)."),
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

    for path, option in ((write_block, "--write-block"), (profile_out if calibrate else None, "--profile-out")):
        if path is not None:
            _check_writable(path, option)  # before minutes of planning or measuring, not a traceback after
    try:
        hw = load_profile(gpu)
    except ProfileError as exc:
        raise typer.BadParameter(str(exc), param_hint="--gpu") from None
    if calibrate:
        _check_calibration_device(hw)
        _calibrate(hw, profile_out)
        if config is None:
            return
        if int(os.environ.get("RANK", "0")) != 0:
            # under torchrun rank 0 plans once, with the profile it wrote: each rank printed the table
            # (and would start --measure's runs), and read the file whether or not rank 0 had written it
            return
        hw = load_profile(profile_out)
    if config is None:
        raise typer.BadParameter("give a training config (or --calibrate alone)", param_hint="CONFIG")
    if gpus < 1:
        raise typer.BadParameter(f"must be >= 1, got {gpus}", param_hint="--gpus")
    for name, value in (("--nodes-of", nodes_of), ("--seq-len", seq_len), ("--global-batch", global_batch), ("--measure", measure)):
        if value < 0:
            raise typer.BadParameter(f"must be >= 0, got {value}", param_hint=name)
    if measure and measure_steps < 2:  # the first step (warm-up) is not timed
        raise typer.BadParameter(f"must be >= 2 (the first step is not timed), got {measure_steps}", param_hint="--measure-steps")
    if top < 1:
        raise typer.BadParameter(f"must be >= 1, got {top}", param_hint="--top")
    from vfm_parallel.planner import format_table, parallel_block, to_json
    from vfm_parallel.planner import plan as make_plan
    from vfm_parallel.trainer import config as config_mod

    try:
        cfg = config_mod.load(config, list(overrides or []))
        spec = model_spec(cfg, seq_len or None)
        batch, batch_from = (global_batch, "as given by --global-batch") if global_batch else default_global_batch(cfg, gpus)
        options = {"gpus_per_node": nodes_of} if nodes_of else {}
        result = make_plan(spec, gpus, hw, global_batch=batch, ema=cfg.ema.enabled, **options)
    except (config_mod.ConfigError, SpecError, PlanError) as exc:
        fail(exc)
    refuse_what_train_refuses(result, config, list(overrides or []))
    if not result.ranked:
        typer.echo(format_table(result, top=top, all_variants=all_variants), err=True)
        import shlex

        # the fewest GPUs were found for this --gpu and --nodes-of: the suggested command repeats them
        same = (f" --gpu {shlex.quote(gpu)}" if gpu != DEFAULT_GPU else "") + (f" --nodes-of {nodes_of}" if nodes_of else "")
        fail(no_fit(result, batch_from, fewest_that_fit(result, lambda n: global_batch or default_global_batch(cfg, n)[0],
                                                        ema=cfg.ema.enabled), same))
    if as_json:
        data = json.loads(to_json(result, top, all_variants))
        data["global_batch_from"] = batch_from
        data["train_command"] = train_command(config, result.best.layout, gpus, result.hardware.gpus_per_node, overrides or [])
        typer.echo(json.dumps(data, indent=2))
    else:
        typer.echo(format_table(result, top=top, all_variants=all_variants))
        typer.echo(f"global batch {batch} samples: {batch_from}")
        typer.echo(f"train the best: {train_command(config, result.best.layout, gpus, result.hardware.gpus_per_node, overrides or [])}")
    if write_block is not None:
        from vfm_plugins.files import replace_file

        keep = {"compile": True} if cfg.parallel.compile else {}
        replace_file(write_block, parallel_block(result.best, keep=keep))  # a link at the name is replaced, not written through
        typer.echo(f"wrote the [parallel] block of {result.best.layout.short()} to {write_block}", err=as_json)
    if measure:
        _measure(result, config, list(overrides or []), gpus, measure, measure_steps, all_variants)


def refuse_what_train_refuses(result, config: Path, overrides: list[str]) -> None:
    """Move the ranked layouts that ``vfm train`` refuses for this config to the refused ones, with its
    reason. The planner checks a layout against the model and the parallel rules alone; the config's
    other sections have rules of their own (``data.packing``: packed batches train with FSDP/HSDP
    only), and the table, the train command and ``--write-block`` must name a layout the run takes."""
    from vfm_parallel.planner.ranking import why_slower
    from vfm_parallel.trainer import config as config_mod

    kept = []
    for p in result.ranked:
        try:
            config_mod.load(config, with_layout(overrides, p.layout), result.world)
        except config_mod.ConfigError as exc:
            p.rejected = str(exc)
            p.reason = f"vfm train refuses it with this config: {exc}"
            result.others.append(p)
            continue
        kept.append(p)
    if len(kept) == len(result.ranked):
        return
    result.ranked = kept
    result.others.sort(key=lambda p: (bool(p.rejected), p.memory.total))
    if kept:  # the reasons name the winner's step: the winner may have changed
        kept[0].reason = ""
        for p in kept[1:]:
            p.reason = why_slower(p, kept[0])


def fewest_that_fit(result, batch_for, *, ema: bool = True, tries: int = 6) -> int:
    """The fewest GPUs (powers of two above the plan's, as whole nodes) at which some layout fits, with
    the global batch ``batch_for(n)``; 0 when none of ``tries`` counts (up to 1024) does. Only where
    memory is the reason: more GPUs do not lift vfm's refusals."""
    from vfm_parallel.planner import PlanError
    from vfm_parallel.planner import plan as make_plan

    if not any(p.oom for p in result.others):
        return 0
    per_node, n = result.hardware.gpus_per_node, 1
    for _ in range(tries):
        n = next(m for m in (2**k for k in range(11)) if m > max(n, result.world) and (m <= per_node or m % per_node == 0))
        if n > 1024:
            return 0
        try:
            if make_plan(result.spec, n, result.hardware, global_batch=batch_for(n), ema=ema).ranked:
                return n
        except PlanError:
            continue
    return 0


def _check_writable(path: Path, option: str) -> None:
    if path.is_dir():
        raise typer.BadParameter(f"{path} is a folder; give a file name (e.g. {path / 'parallel.toml'})", param_hint=option)
    if not path.parent.is_dir():
        raise typer.BadParameter(f"the folder {path.parent} does not exist; create it or give a file in an existing folder",
                                 param_hint=option)
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise typer.BadParameter(f"{path} cannot be written (permission denied)", param_hint=option)


def no_fit(result, batch_from: str, fewest: int = 0, options: str = "") -> str:
    """Why no layout is left, in one line: what is out of memory (the least it needs, and the fewest
    GPUs that fit), what vfm refuses, and the data-parallel degrees the global batch rules out."""
    from vfm_parallel.planner.ranking import GIB

    s, hw = result.spec, result.hardware
    parts = []
    oom = [p for p in result.others if p.oom and not p.rejected]
    if oom:
        least = min(p.memory.total for p in oom)
        parts.append(f"{len(oom)} layouts run out of memory (the smallest needs {least / GIB:.1f} GiB per GPU, "
                     f"{hw.name} has {hw.usable_bytes / GIB:.1f} usable): "
                     + (f"{fewest} GPUs fit it (vfm plan ... --gpus {fewest}{options})" if fewest else "more GPUs")
                     + ", or a GPU with more memory (--gpu)")
    refused = [p for p in result.others if p.rejected]
    if refused:
        parts.append(f"{len(refused)} layouts vfm refuses (listed above)")
    if result.batch_excludes:
        parts.append(f"data parallelism over {', '.join(map(str, result.batch_excludes))} ranks is left out because the "
                     f"global batch of {result.global_batch} samples ({batch_from}) is not a multiple of it; --global-batch "
                     f"{-(-result.global_batch // result.world) * result.world} allows every degree")
    return f"no layout of {result.world} x {hw.name} fits {s.name} at {s.seq_len} tokens: " + "; ".join(parts)


def _check_calibration_device(hw) -> None:
    """Refuse to calibrate a profile of another kind of device than the one --calibrate measures, as the
    profile says (its ``device``), whatever its name: a CPU's matmul rate would become the peak of a
    profile that keeps a GPU's memory, HBM and NVLink figures (and a GPU's efficiencies would be
    fractions of a CPU's peak), which plans neither."""
    import torch

    from vfm_parallel.planner.hardware import available, load_profile

    here = "cuda" if torch.cuda.is_available() else "cpu"
    if hw.device == here:
        return
    where = f"{hw.name} ({hw.path})" if hw.path and not hw.path.startswith(str(_profiles_dir())) else hw.name
    if here == "cpu":
        raise typer.BadParameter(f"this machine has no CUDA GPU, so --calibrate measures its CPU, and {where} is a GPU's "
                                 "profile (device = \"cuda\", also what a file without the key is unless its name or calibration.source "
                                 "says cpu; a CPU's says device = \"cpu\"): give --gpu cpu to calibrate this CPU (or calibrate on the GPU machine)",
                                 param_hint="--gpu")
    gpus = ", ".join(n for n in available() if load_profile(n).device == "cuda")
    raise typer.BadParameter(f"this machine has a CUDA GPU, so --calibrate measures it, and {where} is a CPU's profile "
                             f"(device = \"cpu\"): give the GPU's datasheet profile ({gpus}) or one calibrated on a GPU",
                             param_hint="--gpu")


def _profiles_dir() -> Path:
    from vfm_parallel.planner.hardware import PROFILES_DIR

    return PROFILES_DIR


def _calibrate(hw, out: Path) -> None:
    from vfm_parallel.planner.calibrate import calibrate as run
    from vfm_parallel.planner.hardware import to_toml
    from vfm_plugins.files import replace_file

    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # under torchrun: measure the collectives too
        import torch

        from vfm_parallel.process_group import ensure_process_group

        ensure_process_group("cuda" if torch.cuda.is_available() else "cpu")
    profile, measured = run(hw)
    rank = int(os.environ.get("RANK", "0"))
    if rank == 0:
        replace_file(out, to_toml(profile, "written by vfm plan --calibrate"))  # a link at the name is replaced
        typer.echo("measured: " + ", ".join(f"{k} {v:.4g}" for k, v in measured.items()))
        typer.echo(f"wrote profile {profile.name} to {out}")


def _measure(result, config: Path, overrides: list[str], gpus: int, k: int, steps: int, all_variants: bool) -> None:
    import time

    from vfm_parallel.planner.measure import measure as run_all

    pool = result.ranked if all_variants else result.distinct()
    chosen = pool[:k]
    typer.echo(f"measuring the top {len(chosen)} predicted layouts, {steps} steps each, under torchrun ({gpus} processes); "
               "Ctrl-C stops the run in hand and its processes")
    predicted_rank = {id(p): i for i, p in enumerate(chosen, 1)}

    def run(p):
        i = predicted_rank[id(p)]
        typer.echo(f"  [{i}/{len(chosen)}] {p.layout.short()} ...", nl=False)
        start = time.perf_counter()
        try:
            rate = run_layout(config, overrides, p.layout, gpus, steps, timeout=600)
        except Exception as exc:
            typer.echo(f" failed after {time.perf_counter() - start:.0f} s: {_failure(exc, p)}")
            raise exc
        typer.echo(f" {rate:,.1f} tokens/s/GPU ({time.perf_counter() - start:.0f} s)")
        return rate

    try:
        measured, rho = run_all(chosen, run)
    except KeyboardInterrupt:
        typer.echo("")
        fail("interrupted: the layout in hand was stopped with its processes; no ranking")
    for line in measured_table(measured, predicted_rank):
        typer.echo(line)
    for line in measure_summary(measured, rho, predicted_rank, result.hardware):
        typer.echo(line)


def _failure(exc: BaseException, p) -> str:
    """A failed layout's reason without the layout's name, which run_layout puts first."""
    text = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
    return text.removeprefix(f"{p.layout.short()}: ")


def measured_table(measured, predicted_rank: dict) -> list[str]:
    """The measured layouts, fastest first, one aligned row each; a layout that failed has no measured
    place ("-") and "failed" for its rate, and its reason on a line of its own under the table (a
    reason in the row, often a long error, pushed the columns after it out of line)."""
    head = f"{'measured':>8}  {'predicted':>9}  {'tokens/s/GPU measured':>21}  {'predicted':>9}  layout"
    rows, reasons, place = [head], [], 0
    for m in measured:
        if m.error:
            where, rate = "-", "failed"
            reasons.append(f"  failed: {m.prediction.layout.short()}: {m.error.removeprefix(m.prediction.layout.short() + ': ')}")
        else:
            place += 1
            where, rate = str(place), f"{m.tokens_per_s_per_gpu:,.1f}"
        rows.append(f"{where:>8}  {predicted_rank[id(m.prediction)]:>9}  {rate:>21}  "
                    f"{m.prediction.tokens_per_s_per_gpu:>9,.1f}  {m.prediction.layout.short()}")
    return rows + reasons


def measure_summary(measured, rho, predicted_rank: dict, hw) -> list[str]:
    """What the measured order says about the prediction, in words."""
    ok = [m for m in measured if not m.error]
    if rho is None:
        return [f"spearman: fewer than two layouts ran ({len(ok)} of {len(measured)}); no order to compare"]
    verdict = ("the same order" if rho >= 0.999 else "mostly the same order" if rho >= 0.5 else
               "little relation" if rho > -0.5 else "mostly the reverse order" if rho > -0.999 else "the reverse order")
    lines = [f"spearman(predicted, measured) = {rho:.3f} over {len(ok)} layouts: {verdict} "
             "(1 = the predicted order, 0 = no relation, -1 = reversed)"]
    failed_best = next((m for m in measured if m.error and predicted_rank[id(m.prediction)] == 1), None)
    if failed_best is not None:
        lines.append(f"the predicted best, {failed_best.prediction.layout.short()}, failed to run: the order above "
                     "leaves it out (its error is in the table)")
    first = next((m for m in ok if predicted_rank[id(m.prediction)] == 1), None)
    if first is not None:
        place = ok.index(first) + 1
        lines.append(f"the predicted best, {first.prediction.layout.short()}, measured {place} of {len(ok)}"
                     + ("" if place == 1 else f"; the fastest measured was {ok[0].prediction.layout.short()}"))
    rates = [m.tokens_per_s_per_gpu for m in ok]
    spread = (max(rates) - min(rates)) / max(rates) if max(rates) > 0 else 0.0
    if spread < 0.2:
        lines.append(f"the measured rates are within {spread:.0%} of each other: a few timed steps on a busy machine "
                     "order them weakly (more --measure-steps, or fewer other jobs)")
    source = hw.calibration.source
    if "not measured" in source or not source:
        lines.append(f"the profile {hw.name} is not measured on this machine ({source or 'no source'}): "
                     "vfm plan --calibrate writes one (docs/plan.md), which makes the predicted figures comparable")
    return lines


def register(app: typer.Typer) -> None:
    app.command("plan", no_args_is_help=True)(plan)
