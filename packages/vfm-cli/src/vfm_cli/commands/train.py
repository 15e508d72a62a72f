"""``vfm train CONFIG [--set k=v ...]``: train a video diffusion transformer from a TOML config.

One process under ``vfm train``; several (and several nodes) under ``torchrun ... -m vfm_cli.main
train CONFIG``. The config is validated (keys, ranges, registry names, mesh vs world size) before
any work; under torchrun the ranks then agree (vfm_parallel.preflight) that every one of them passed.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import List, NoReturn, Optional

import typer

from vfm_cli.failing import fail, fail_once, own_traceback_first, peer_lost, who_was_lost


def train(
    config: Path = typer.Argument(..., help="TOML training config (see configs/)."),
    overrides: Optional[List[str]] = typer.Option(None, "--set", help="Override a key: --set optim.lr=1e-4 (repeatable)."),
    peak_tflops: Optional[float] = typer.Option(None, "--peak-tflops", help="Device peak TFLOP/s for MFU (default: table / measured)."),
    validate_only: bool = typer.Option(False, "--validate", help="Validate the config and exit."),
    world_size: Optional[int] = typer.Option(None, "--world-size", help="With --validate: check the mesh for this many ranks."),
    trust_dataset_code: bool = typer.Option(False, "--trust-dataset-code", help="Let energon build the objects and run the code the datasets' and blend's YAML name (default: refused; docs/security.md)."),
) -> None:
    """Train a model: 4D-parallel under torchrun, exact resume from DCP checkpoints, TensorBoard, MFU."""
    from vfm_parallel.trainer import config as config_mod
    from vfm_parallel.process_group import env_world_size

    items = list(overrides or [])
    if peak_tflops is not None:
        items.append(f"logging.peak_tflops={peak_tflops}")
    if trust_dataset_code:
        items.append("data.trust_dataset_code=true")
    failure, cfg = None, None
    try:
        world = world_size or env_world_size()
        cfg = config_mod.load(config, items, world)
        _shard_paths(cfg, require=not validate_only)
        from vfm_cli import recipe

        # --validate checks the config for the machines it is meant for: what this machine's hardware
        # cannot run (megatron-sp without CUDA) is a note there, and refused by a run
        hardware: list | None = [] if validate_only else None
        resolved = recipe.validate(cfg, world, require_data=not validate_only, hardware=hardware)  # the run is built from it: resolved once
    except Exception as exc:  # any error, agreed on first: a node's may be its own (a damaged copy of init_from)
        failure = exc
    if not validate_only:  # a run: ranks that passed must not wait for one that failed (a node without the shards)
        failure = _agree_to_start(failure)
    if failure is not None:
        _refuse_or_raise(failure, _refusals(cfg))  # a refusal: one line per node, like a config error
    _warn_idle_strategies(cfg, world)
    if validate_only:
        for exc in hardware:
            typer.echo(f"note: {exc.note()}", err=True)
        unchecked = "" if recipe.data_available(cfg) else " (shards not found here: checked against data.latent_shape)"
        resumes = _resume_check(cfg, world)
        typer.echo(f"{config}: valid{unchecked}{resumes}")
        return

    import os

    from vfm_parallel.trainer import TrainingStopped
    from vfm_parallel.trainer import train as run

    rank0 = int(os.environ.get("RANK", "0")) == 0
    if rank0:
        typer.echo(_start_line(cfg, resolved, world))
    sinks = _sinks(cfg) if rank0 else []
    refusals = _refusals(cfg)
    try:
        result = run(cfg, recipe.parts_builder(resolved), sinks=sinks)
    except refusals as exc:
        _close(sinks)  # the progress bar's last line ends before the error
        _refuse_or_raise(exc, refusals)
    except KeyboardInterrupt:  # a second Ctrl-C (stop at once), or one before training set up its handler
        _close(sinks)
        if rank0:
            typer.echo(f"interrupted: stopped at once, without a checkpoint of this step; the same command resumes "
                       f"from the newest checkpoint under {cfg.train.out_dir}/checkpoints", err=True)
        raise typer.Exit(130) from None
    except TrainingStopped as exc:  # SIGTERM / Ctrl-C: every rank stopped after the same step, saved
        _close(sinks)
        if rank0:
            typer.echo(str(exc), err=True)
        from vfm_parallel.process_group import leave_distributed

        leave_distributed(exc.exit_code)  # a torchrun rank ends there
        raise typer.Exit(exc.exit_code) from None
    except RuntimeError as exc:  # a collective whose peer is gone: one line, not the backend's traceback
        lost = peer_lost(exc)
        if lost is None:
            raise
        _close(sinks)
        fail(f"rank {os.environ.get('RANK', '0')} lost contact with another rank of this job, which stopped or was "
             f"killed ({who_was_lost()}): {lost}")
    if rank0:
        _summary(result)
    # a torchrun rank ends in ends_torchrun_rank, from here and from an error; a stop leaves above, through
    # the barrier every stopped rank reaches (ends_torchrun_rank takes a non-zero status for an error: no barrier)


def _refusals(cfg) -> tuple[type[Exception], ...]:
    """What vfm train reports in one ``error:`` line and exit 1, before the run and during it: a bad config
    or plugin (a family's preset or model class), NaN training (nothing was exported), another run owning
    train.out_dir, a damaged or incompatible checkpoint, a layout the model refuses, an output folder the
    run cannot write as it should (an OSError: a link where it appends, a full disk), unusable shards
    (``cfg`` reads shards; vfm-data is imported for shard data only), or any of these on some ranks only
    (PreflightError names them). Anything else is a bug, shown with its traceback."""
    import importlib

    from vfm_models.export import NonFiniteWeightsError
    from vfm_parallel import LayoutError
    from vfm_parallel.checkpoint import CheckpointError
    from vfm_parallel.preflight import PreflightError
    from vfm_parallel.trainer import NonFiniteTrainingError
    from vfm_parallel.trainer.config import ConfigError
    from vfm_plugins import FolderLockedError, PluginError

    shards = cfg is not None and cfg.data.source == "shards"
    data_errors = (importlib.import_module("vfm_data.errors").DataError,) if shards else ()
    return (ConfigError, PluginError, NonFiniteTrainingError, NonFiniteWeightsError, FolderLockedError, CheckpointError,
            LayoutError, OSError, PreflightError, *data_errors)


def _refuse_or_raise(exc: Exception, refusals: tuple[type[Exception], ...]) -> NoReturn:
    """One ``error:`` line per node for a refusal, ``exc`` raised (its traceback, as in one process) for
    anything else. The agreement's error is a refusal on every rank; a rank whose own failure under it
    is none shows that failure's traceback first (:func:`vfm_cli.failing.own_traceback_first`)."""
    own_traceback_first(exc, refusals)
    if isinstance(exc, refusals):
        fail_once(exc)
    raise exc


def _agree_to_start(failure: Exception | None) -> Exception | None:
    """Under torchrun, what every rank reports for the checks above (vfm_parallel.preflight.agree): they
    read node-local files (the shards, model.init_from), so they may fail on some nodes only, whose ranks
    would end alone while the others wait for them in the process group's start. In one process: ``failure``."""
    from vfm_parallel.process_group import env_world_size

    if env_world_size() <= 1:
        return failure
    from vfm_parallel.preflight import agree
    from vfm_parallel.trainer.distributed import pick_device

    try:
        device_type = pick_device().type
    except RuntimeError as exc:  # set_device: e.g. "invalid device ordinal" on a node with fewer working GPUs
        device_type, failure = "cuda", failure or exc  # than ranks; raised here, the other nodes would wait
    return agree(failure, device_type)


def _start_line(cfg, resolved, world: int) -> str:
    """What one step holds, said before the first runs: on a CPU a step of large samples takes minutes, and
    a log shows nothing until step ``logging.interval``; the tokens per sample tell why (attention grows with
    their square)."""
    from vfm_cli.recipe.data_shapes import data_shapes
    from vfm_cli.recipe.resolution import grid_of
    from vfm_plugins.text import counted

    dims = cfg.parallel.resolved(world)
    dp = dims["dp_replicate"] * dims["dp_shard"]
    d, a = cfg.data, cfg.optim.grad_accum
    how = f"micro_batch {d.micro_batch} x grad_accum {a} x {counted(dp, 'data-parallel rank')}"
    if d.packing:
        held = f"packs of {d.max_seq_len:,} tokens ({how})"
        size = ""
    else:
        tokens = {tuple(shape): math.prod(grid_of(shape, resolved.mcfg)) for _, shape in data_shapes(cfg, resolved)}
        largest = max(tokens, key=tokens.__getitem__)
        fewest, most = min(tokens.values()), tokens[largest]
        per_sample = f"{most:,}" if fewest == most else f"{fewest:,} to {most:,}"
        patch = "x".join(map(str, resolved.mcfg.patch))
        held = f"samples ({how})"
        size = f", {per_sample} tokens per sample (latent {'x'.join(map(str, largest))}, patch {patch})"
    return (f"train: {cfg.train.steps} steps of {d.micro_batch * a * dp} {held}{size}; a line every "
            f"{counted(cfg.logging.interval, 'step')} (logging.interval)")


def _close(sinks: list) -> None:
    """Close the metrics sinks that have a ``close`` (the progress bar ends its line before an error)."""
    for sink in sinks:
        getattr(sink, "close", lambda: None)()


def _resume_check(cfg, world: int) -> str:
    """With --validate: whether the checkpoint the run would resume from (the newest under out_dir,
    or the one named) takes these settings, by the run's own checks (its files are not hashed here):
    "" (a fresh start), "; resumes from step N (path)", or the run's one-line refusal and exit 1."""
    from vfm_parallel import checkpoint as ckpt
    from vfm_parallel.trainer import resume as resume_mod

    root = Path(cfg.train.out_dir) / "checkpoints"
    try:  # the run's pick (auto: the newest whose state reads, a damaged newer one warned about)
        path = resume_mod.choose_checkpoint(cfg, root, check=ckpt.read_state)
        if path is None:
            return ""
        state = ckpt.read_state(path)
        resume_mod.check_resumable(path, state, cfg, cfg.parallel.resolved(world), root)
    except ckpt.CheckpointError as exc:
        fail(exc)
    return f"; resumes from step {state['step']} ({path})"


def _warn_idle_strategies(cfg, world: int) -> None:
    """A listed strategy over dimensions of size 1 (``tp`` with tp = 1): one ``warning:`` line,
    printed by rank 0 only (every rank validates the same config and world size, so once per job).
    Not an error: one config often serves 1-GPU and N-GPU runs (vfm_parallel.idle_strategies)."""
    import os

    from vfm_parallel import ParallelDims
    from vfm_parallel.parallel_model import idle_strategies

    if int(os.environ.get("RANK", "0")) != 0:
        return
    notes = {"dp_shard": f"(-1 with world size {world})"} if cfg.parallel.dp_shard == -1 else {}
    for line in idle_strategies(ParallelDims(**cfg.parallel.resolved(world)), list(cfg.parallel.strategies), notes):
        typer.echo(f"warning: {line}", err=True)


def _shard_paths(cfg, *, require: bool) -> None:
    """``data.blend`` (and ``validation.blend``) naming the output folder of ``vfm shard`` means its
    ``blend.yaml`` (the folder itself is no energon dataset). A blend or shard folder that does not
    exist is one line saying so (``require``: not for ``--validate``, which may run away from the
    shards), before the trust check would call it untrusted metadata and suggest --trust-dataset-code."""
    from vfm_parallel.trainer.config import ConfigError

    # previews read their captions from validation.blend too, validation on or off
    watched = cfg.validation.interval or cfg.preview.interval
    held_out = Path(cfg.validation.blend) if watched and cfg.validation.blend else None
    if held_out is not None:  # the held-out shards: the same rule, whatever the training data's source
        cfg.validation.blend = str(_blend_file(held_out))
        if require and not held_out.exists():
            raise ConfigError("validation.blend", f"{held_out} does not exist; accepted: the blend.yaml that `vfm shard` "
                                                  "writes, its output folder, or a prepared dataset folder (with .nv-meta/)")
    if cfg.data.source != "shards":
        return
    if cfg.data.blend:
        cfg.data.blend = str(_blend_file(Path(cfg.data.blend)))
    if not require:
        return
    key, paths = ("data.blend", [cfg.data.blend]) if cfg.data.blend else ("data.shards", list(cfg.data.shards))
    for path in paths:
        if not Path(path).exists():
            raise ConfigError(key, f"{path} does not exist; accepted: the blend.yaml that `vfm shard` writes, its output "
                                   f"folder, or prepared dataset folders (with .nv-meta/)")


def _blend_file(path: Path) -> Path:
    """The output folder of ``vfm shard`` means its ``blend.yaml``; anything else is itself."""
    if path.is_dir() and not (path / ".nv-meta").is_dir() and (path / "blend.yaml").is_file():
        return path / "blend.yaml"
    return path


def _sinks(cfg) -> list:
    """Rank 0's metric sinks: the progress display (a bar on a terminal, whole lines in a log), or a
    line per logged step."""
    if cfg.logging.progress:
        from vfm_cli.train_progress import progress_sink

        return [progress_sink(cfg.train.stop_at or cfg.train.steps)]
    from vfm_parallel.trainer.metrics import ConsoleSink

    return [ConsoleSink(cfg.train.steps)]


def _summary(result) -> None:
    import math

    losses = [result.losses[s] for s in sorted(result.losses)]
    if losses:
        k = max(1, len(losses) // 10)  # means over the first / last tenth: single diffusion losses are noisy

        def mean(values: list) -> str:  # over the finite ones: a skipped non-finite step is no loss
            finite = [v for v in values if math.isfinite(v)]
            return f"{sum(finite) / len(finite):.5f}" if finite else "nan"

        skipped = sum(not math.isfinite(v) for v in losses)
        note = f"; {skipped} step(s) skipped as non-finite, left out of the means" if skipped else ""
        typer.echo(f"loss {mean(losses[:k])} (mean of steps {result.start_step + 1}-{result.start_step + k}) -> "
                   f"{mean(losses[-k:])} (mean of steps {result.final_step - k + 1}-{result.final_step}){note}")
    if result.mean_tokens_per_s > 0:  # no step timed (none run, or only the first): no figure
        typer.echo(f"tokens/s {result.mean_tokens_per_s:.1f}  MFU {result.mean_mfu:.3%} by 6N+12LhS (the seeds' and NeMo's "
                   f"convention), {result.mean_mfu_executed:.3%} of the FLOPs executed "
                   f"(peak {result.peak_tflops:.3f} TFLOP/s per device, {result.peak_source})")
    for label, path in (("checkpoint", result.checkpoint), ("export", result.export), ("loss curve", result.loss_curve)):
        if path is not None:
            typer.echo(f"{label}: {path}")


def register(app: typer.Typer) -> None:
    from vfm_cli.torchrun_exit import ends_torchrun_rank

    app.command("train")(ends_torchrun_rank(train))
