"""``vfm shard``: curated clips -> training shards (vfm-curator's sharding pipeline)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, Optional

import typer

from vfm_cli.failing import fail


def shard(
    clips_dir: Path = typer.Argument(..., help="Output folder of `vfm curate` (clips/ + clips.parquet)."),
    out: Path = typer.Option(..., "-o", "--out", help="Shards folder: one energon dataset per bucket, blend.yaml, failures.jsonl."),
    tokenizer: Optional[str] = typer.Option(
        None, "--tokenizer", help="Registered vfm-models tokenizer (pixel, causal3d, ...); required without --config."),
    text_encoder: Optional[str] = typer.Option(
        None, "--text-encoder", help="Registered vfm-models text encoder (hash, t5, ...); required without --config."),
    config: Optional[Path] = typer.Option(None, "--config", help=r"A .toml or .json sharding configuration (sections \[shard], \[run], ...)."),
    runner: Optional[str] = typer.Option(None, "--runner", help="ray (default) or serial (in-process, no Ray)."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Run on this Ray cluster instead of a local one."),
    num_cpus: Optional[float] = typer.Option(None, "--num-cpus", help="CPUs of the embedded local Ray."),
    require_captions: Optional[bool] = typer.Option(
        None, "--require-captions/--no-require-captions",
        help="Fail clips without a caption (the default), or shard them unconditional (their text is the empty caption's)."),
    resolution: Optional[List[str]] = typer.Option(
        None, "--resolution", metavar="HxW",
        help="A bucket resolution, height x width in pixels (repeat for several, e.g. --resolution 256x256 --resolution "
             "144x256 --resolution 256x144); each clip goes to the one nearest its aspect ratio. Default: the config's, else 256x256."),
    frames: Optional[List[int]] = typer.Option(
        None, "--frames", metavar="N",
        help="A video frame count (repeat for several); a clip gets the largest it fills. Default: the config's, else 17."),
    frame_stride: Optional[int] = typer.Option(None, "--frame-stride", metavar="N", help="Take every N-th frame (default 1)."),
    windows: Optional[int] = typer.Option(
        None, "--windows", metavar="N",
        help="Samples per clip: N consecutive windows of its frame count (1: its first frames only). Default: the "
             "config's, else 0 = every window the clip fills."),
    max_upscale: Optional[float] = typer.Option(
        None, "--max-upscale", metavar="X",
        help="Refuse clips their bucket would enlarge more than X times (1: never enlarge). Default: no limit, a warning past 2x."),
    max_crop: Optional[float] = typer.Option(
        None, "--max-crop", metavar="F",
        help="Refuse clips whose centre crop to their bucket would cut more than F of the frame (0.3: 30%). Default: no "
             "limit, a warning past 0.25."),
    val_fraction: Optional[float] = typer.Option(
        None, "--val-fraction", metavar="F",
        # "\\[": rich reads a bare "[validation]" as a style tag and prints nothing of it
        help="Hold out about this share of the source videos (0 <= F < 1), all clips of each, in a val split (val-*.tar "
             "shards, blend.yaml's splits.val) for vfm train's \\[validation]; a video's split follows from its content (the "
             "fingerprint vfm curate recorded), so it never moves on a re-run, nor when the video is moved or curated "
             "again elsewhere; a video the output folder holds keeps its side. Default: the config's, else 0 (every clip trains)."),
    no_progress: bool = typer.Option(False, "--no-progress", help="Do not draw progress bars."),
    retry_failed: Optional[str] = typer.Option(
        None, "--retry-failed", metavar="WHAT",
        help="Run failed clips again: 'all', a cause (input, config, machine) or a reason kind (failures.jsonl's 'kind')."),
    redo_changed: bool = typer.Option(
        False, "--redo-changed",
        help="Take the samples of clips changed in the clip table (or gone from it) since they were sharded out of the "
             "shards, and shard the changed ones again."),
) -> None:
    """Tokenize curated clips and encode their captions into WebDataset shards, one sub-dataset per
    (height, width, frames) bucket, listed in blend.yaml.

    Re-running skips clips already sharded and clips that failed (unless --retry-failed, a machine
    failure, or changed options or clips), and rebuilds any bucket's energon index that does not match
    its shards. Exits 1 with the reason when it leaves no sample to train on (every clip failed), and
    warns when most clips failed for one reason."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from vfm_cli.commands._interrupted import shard_files, shard_interrupted
    from vfm_cli.pipeline_cli import StageProgress, apply_run_options, figures_table
    from vfm_cli.tables import print_table
    from vfm_curator.pipelines.sharding import ShardConfig
    from vfm_curator.api import shard as run
    from vfm_curator.errors import NothingWrittenError, StopRun
    from vfm_plugins import FolderLockedError, printable

    err = Console(stderr=True)
    try:
        cfg = ShardConfig.load(config) if config is not None else ShardConfig()
        cfg.execution.check()  # [run] ranges and stage names before any work (the run checks the same)
    except (OSError, ValueError, TypeError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from exc
    if config is None and (tokenizer is None or text_encoder is None):
        raise typer.BadParameter(_missing_models(tokenizer, text_encoder))
    apply_run_options(cfg.execution, runner, ray_address, num_cpus)
    buckets_given = _bucket_options(resolution, frames, frame_stride, max_upscale, max_crop, windows)
    if val_fraction is not None:
        from vfm_curator.pipelines.shard_split import check_val_fraction

        try:
            buckets_given["val_fraction"] = check_val_fraction(val_fraction)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--val-fraction") from exc
    before = shard_files(out)  # what a Ctrl-C line counts against
    try:
        summary = run(clips_dir, out, cfg, tokenizer=tokenizer, text_encoder=text_encoder, require_captions=require_captions,
                      progress=None if no_progress else StageProgress(), retry_failed=retry_failed,
                      redo_changed=redo_changed, **buckets_given)
    except NothingWrittenError as exc:  # the tables and failures below still print; the problem line exits 1
        summary = exc.summary
    except (ValueError, KeyError, FileNotFoundError, StopRun, FolderLockedError) as exc:  # FolderLockedError: another run owns OUT
        fail(exc)
    except KeyboardInterrupt:  # Ctrl-C: say what is kept and how to go on (130: the shell's code for SIGINT)
        typer.echo(shard_interrupted(out, before), err=True)
        raise typer.Exit(130) from None
    buckets = Table(title=f"vfm shard -> {summary.out}")
    for column in ("bucket (HxWxT)", "samples", "tokens", "shards", "MB"):
        buckets.add_column(column, justify="right")
    for name, b in summary.buckets.items():
        buckets.add_row(name, str(b["samples"]), str(b["tokens"]), str(b["shards"]), f"{b['bytes'] / 1e6:.2f}")
    buckets.add_row("total", str(summary.samples), str(summary.tokens), "", f"{summary.bytes / 1e6:.2f}")
    run_table = figures_table((
        ("clips", summary.clips),
        ("written now", _written_now(summary)),
        ("skipped (sharded before)", summary.skipped),
        ("sharded again (changed)", summary.resharded),
        ("samples taken out (changed or gone)", summary.samples_dropped),
        ("skipped (failed before)", summary.failed_before),
        ("failed before, run again", summary.retried),
        ("failures", summary.failures),
        *((("held out for val (clips, samples)", _held_out(summary)),) if summary.val_fraction or summary.val_samples else ()),
        ("upscaled now (most)", f"{summary.upscaled} ({summary.most_upscale:.2f}x)" if summary.upscaled else 0),
        ("cropped now (most)", f"{summary.cropped} ({summary.most_crop:.0%} of the frame)" if summary.cropped else 0),
        ("cut short now (windows = 0 frame cap)", summary.cut_short),
        ("wall seconds", f"{summary.wall_s:.1f}"),
        ("seconds per stage", ", ".join(f"{k}={v:.1f}" for k, v in summary.stage_seconds.items())),
        ("throughput (samples/s)", f"{summary.throughput:.2f}"),
        ("workers", summary.workers),
    ))
    console = Console()
    print_table(buckets, console)
    print_table(run_table, console)
    if summary.blend:
        typer.echo(f"blend: {summary.blend}")
    problem, warning = summary.problem(), summary.warning()
    if summary.failures:  # what failed and why, not only where to look (the kind an error or warning below names, once)
        typer.echo(f"failures: {summary.failures} clip(s), listed in {Path(summary.out) / 'failures.jsonl'}")
        said = summary.top_failure()[0] if problem or warning else None
        for kind, f in sorted(summary.failure_kinds.items(), key=lambda kv: -kv[1]["count"]):
            if kind != said:
                typer.echo(printable(f"  {f['count']} {kind} ({f['cause']}), e.g.: {f['reason']}"))
    for notice in summary.notices:  # clips enlarged or cropped a lot (no limit set), long clips cut short
        err.print(f"[yellow]warning:[/yellow] {escape(printable(notice))}", soft_wrap=True, highlight=False)
    if warning:  # escape: a reason may hold "[shard]", which rich would read as a style tag
        err.print(f"[yellow]warning:[/yellow] {escape(printable(warning))}", soft_wrap=True, highlight=False)
    if problem:  # nothing to train on: never a quiet exit 0
        err.print(f"[red]error:[/red] {escape(printable(problem))}", soft_wrap=True, highlight=False)
        raise typer.Exit(1)


def _written_now(summary) -> int | str:
    """Clips and samples written this run; a clip sharded before that got the windows a raised
    ``windows`` adds (a top-up) counts apart, so a top-up is not shown as 0 clips."""
    if summary.samples_written == summary.written and not summary.topped_up:
        return summary.written
    clips = [f"{summary.written} clips"] if summary.written or not summary.topped_up else []
    if summary.topped_up:
        clips.append(f"{summary.topped_up} topped up (windows added)")
    return f"{' + '.join(clips)}, {summary.samples_written} samples"


def _held_out(summary) -> str:
    """The val split of the whole output against the fraction asked for (of source videos: the
    split is by video, so the clips' share follows how many clips each video gave)."""
    clips, videos = summary.val_clips + summary.train_clips, summary.val_videos + summary.train_videos
    share = f"{summary.val_clips / clips:.0%}" if clips else "-"
    return (f"{summary.val_clips} of {clips} clips ({share}; {summary.val_videos} of {videos} videos, val_fraction "
            f"{summary.val_fraction:g}), {summary.val_samples} of {summary.samples} samples")


_HXW = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*$")


def _bucket_options(resolution, frames, frame_stride, max_upscale, max_crop, windows) -> dict:
    """The bucket options given on the command line (they replace the config's), each checked with
    the error naming its option."""
    from vfm_curator.stages.shard_decode import check_buckets, check_resize_limits, check_windows

    given: dict = {}
    if resolution:
        pairs = []
        for value in resolution:
            m = _HXW.match(value)
            if not m:
                raise typer.BadParameter(f"{value!r} is not HEIGHTxWIDTH in pixels; e.g. 256x256, 144x256 (landscape 16:9) "
                                         "or 256x144 (portrait 9:16)", param_hint="--resolution")
            if int(m.group(1)) < 1 or int(m.group(2)) < 1:
                raise typer.BadParameter(f"{value!r}: height and width must be at least 1 pixel", param_hint="--resolution")
            pairs.append([int(m.group(1)), int(m.group(2))])
        given["resolutions"] = pairs
    if frames:
        given["frames"] = list(frames)
    for key, value in (("frame_stride", frame_stride), ("max_upscale", max_upscale), ("max_crop", max_crop),
                       ("windows", windows)):
        if value is not None:
            given[key] = value
    # each check with the others' values left valid, so that its error belongs to its own option
    checks = (("--frames", lambda: check_buckets([[1, 1]], given.get("frames", [2]), 1)),
              ("--frame-stride", lambda: check_buckets([[1, 1]], [2], given.get("frame_stride", 1))),
              ("--max-upscale", lambda: check_resize_limits(max_upscale, None)),
              ("--max-crop", lambda: check_resize_limits(None, max_crop)),
              ("--windows", lambda: windows is None or check_windows(windows)))
    for hint, check in checks:
        try:
            check()
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint=hint) from exc
    return given


def _missing_models(tokenizer: str | None, text_encoder: str | None) -> str:
    """Which of --tokenizer / --text-encoder is missing, with the registered names of each."""
    from vfm_models.plugins import host

    missing = [f"{option} (registered: {', '.join(host.names(kind))})"
               for option, kind, given in (("--tokenizer", "tokenizers", tokenizer), ("--text-encoder", "text_encoders", text_encoder))
               if given is None]
    them = "it" if len(missing) == 1 else "them"
    return f"name {' and '.join(missing)}, or give {them} in --config [shard]; e.g. --tokenizer pixel --text-encoder hash"


def register(app: typer.Typer) -> None:
    app.command("shard", no_args_is_help=True)(shard)
