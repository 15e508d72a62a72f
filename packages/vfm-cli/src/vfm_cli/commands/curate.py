"""``vfm curate``: cut raw videos into clips (vfm-curator's clipping pipeline)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from vfm_cli.failing import fail


def curate(
    inputs: List[str] = typer.Argument(..., help="Video files, directories, globs, or .jsonl/.csv manifests."),
    out: Path = typer.Option(..., "-o", "--out", help="Output folder (clips/, clips.parquet, failures.jsonl, report.html)."),
    config: Optional[Path] = typer.Option(None, "--config", help="A .toml or .json pipeline configuration."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Run on this Ray cluster instead of a local one."),
    runner: Optional[str] = typer.Option(None, "--runner", help="ray (default) or serial (in-process, no Ray)."),
    num_cpus: Optional[float] = typer.Option(None, "--num-cpus", help="CPUs of the embedded local Ray."),
    gpus: Optional[int] = typer.Option(
        None, "--gpus", metavar="N", help="GPUs the run may use (run.num_gpus): 0 runs every stage on the CPU; N > 0 "
        "needs a visible CUDA device (or --ray-address) and lets stages whose device is auto (embed, caption) run there. "
        "Default: the config's run.num_gpus, else what Ray finds."),
    no_progress: bool = typer.Option(False, "--no-progress", help="Do not draw progress bars."),
    shot_detector: Optional[str] = typer.Option(
        None, "--shot-detector", metavar="NAME", help="How the split stage finds shots: content (default), adaptive, "
        "transnetv2, a plugin's detector, or stride."),
    shot_option: Optional[List[str]] = typer.Option(
        None, "--shot-option", metavar="KEY=VALUE", help="An option of the shot detector (repeatable), e.g. "
        "adaptive_threshold=2.5 or weights=transnetv2.safetensors; VALUE is read as JSON when it parses, else as text."),
    captioner: Optional[str] = typer.Option(
        None, "--captioner", help="Caption clips that have no caption with this registered captioner (endpoint, vlm)."),
    caption_url: Optional[str] = typer.Option(
        None, "--caption-url", help="endpoint captioner: the OpenAI-compatible server's base URL (e.g. http://localhost:8000)."),
    caption_model: Optional[str] = typer.Option(
        None, "--caption-model", help="endpoint: the served model name; vlm: the local transformers folder."),
    caption_prompt: Optional[str] = typer.Option(None, "--caption-prompt", help="The captioner's prompt."),
    caption_api_key_env: Optional[str] = typer.Option(
        None, "--caption-api-key-env", metavar="VAR", help="endpoint: the environment variable holding the API key."),
    caption_qa_model: Optional[Path] = typer.Option(
        None, "--caption-qa-model", help="Score each caption against its frames with this local CLIP or SigLIP folder "
        "(adds the caption_qa stage)."),
    caption_min_score: Optional[float] = typer.Option(
        None, "--caption-min-score", help="Caption QA threshold: a z-score within the folder (default -2) or, with "
        "--caption-qa-calibration raw, a raw cosine."),
    caption_qa: Optional[str] = typer.Option(
        None, "--caption-qa", metavar="flag|drop", help="What a caption under the threshold does: flag (listed in the "
        "report, kept) or drop (taken out of clips.parquet)."),
    caption_qa_calibration: Optional[str] = typer.Option(
        None, "--caption-qa-calibration", metavar="z|raw", help="Read --caption-min-score as a z-score (z) or a raw cosine (raw)."),
    dedup: Optional[bool] = typer.Option(
        None, "--dedup/--no-dedup", help="Remove near-duplicate clips by embedding over the whole folder (off by default)."),
    dedup_threshold: Optional[float] = typer.Option(
        None, "--dedup-threshold", help="Cosine similarity at or above which two clips are duplicates (default 0.95); implies --dedup."),
    retry_failed: Optional[str] = typer.Option(
        None, "--retry-failed", metavar="WHAT",
        help="Run failed videos again: 'all', a cause (input, config, machine) or a reason kind (failures.jsonl's 'kind')."),
    redo_changed: bool = typer.Option(
        False, "--redo-changed",
        help="Clip again the finished videos whose file, caption or stage options changed since (their clips are replaced)."),
) -> None:
    """Cut videos into clips: decode, split into shots, stitch, transcode to H264, embed, caption,
    filter, write.

    Re-running on the same output folder skips videos that finished (also when their file, caption
    or options changed since: --redo-changed clips those again); clips.parquet holds every finished
    video of the folder. Failed videos run again when the machine failed them
    (up to run.max_attempts), when the options that failed them or the file changed, or with --retry-failed.
    Exits 1 with the reason when the folder holds no clip (every video failed); Ctrl-C keeps what finished."""
    from rich.console import Console

    from vfm_cli.commands._interrupted import curate_interrupted, curate_records
    from vfm_cli.pipeline_cli import StageProgress, apply_run_options, figures_table
    from vfm_cli.tables import print_table
    from vfm_curator.api import curate as run
    from vfm_curator.config import CurateConfig
    from vfm_curator.errors import NothingWrittenError, StopRun
    from vfm_curator.pipelines.clipping import stage_specs
    from vfm_curator.shot_detectors import apply_shot_options
    from vfm_curator.pipelines.review import apply_options as apply_review_options
    from vfm_plugins import FolderLockedError

    err = Console(stderr=True)
    # the command-line options each step applies: an error names them (Typer's param hint), else --config
    review = ("--caption-qa-model", caption_qa_model, "--caption-min-score", caption_min_score, "--caption-qa", caption_qa,
              "--caption-qa-calibration", caption_qa_calibration, "--dedup", dedup, "--dedup-threshold", dedup_threshold)
    captions = ("--captioner", captioner, "--caption-url", caption_url, "--caption-model", caption_model,
                "--caption-prompt", caption_prompt, "--caption-api-key-env", caption_api_key_env)
    shots = ("--shot-detector", shot_detector, "--shot-option", shot_option)
    hint = "--config"
    try:
        cfg = CurateConfig.load(config) if config is not None else CurateConfig()
        hint = _given(*review)
        apply_review_options(cfg, caption_qa_model=caption_qa_model, caption_min_score=caption_min_score,
                             caption_qa=caption_qa, caption_calibration=caption_qa_calibration, dedup=dedup,
                             dedup_threshold=dedup_threshold)
        hint = _given(*captions)
        apply_caption_options(cfg, captioner, caption_url, caption_model, caption_prompt, caption_api_key_env)
        hint = _given(*shots)
        apply_shot_options(cfg, shot_detector, shot_option or [])
        hint = "--config"
        apply_gpus(cfg, gpus, ray_address)
        try:
            stage_specs(cfg, out)  # every option range-checked before any work (the run checks the same)
        except ValueError:  # the config's fault unless it passes alone: then the command line's options
            hint = _given(*review, *captions, *shots) if config is None or _valid_alone(config, out) else "--config"
            raise
    except GpusError as exc:
        raise typer.BadParameter(str(exc), param_hint="--gpus") from exc
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint=hint) from exc
    apply_run_options(cfg, runner, ray_address, num_cpus)
    before = curate_records(out)  # what a Ctrl-C line counts against
    try:
        summary = run(inputs, out, cfg, progress=None if no_progress else StageProgress(), retry_failed=retry_failed,
                      redo_changed=redo_changed)
    except NothingWrittenError as exc:  # the table and report lines below still print; the problem line exits 1
        summary = exc.summary
    except (ValueError, StopRun, FolderLockedError) as exc:  # FolderLockedError: another run owns OUT; StopRun: disk full
        fail(exc)
    except KeyboardInterrupt:  # Ctrl-C: say what is kept and how to go on (130: the shell's code for SIGINT)
        typer.echo(curate_interrupted(out, before), err=True)
        raise typer.Exit(130) from None
    table = figures_table((
        ("videos", summary.videos),
        ("processed now", summary.processed),
        ("skipped (finished before)", summary.skipped),
        ("clipped again (changed)", summary.redone),
        ("copies of finished videos", len(summary.copies)),
        ("failed before, run again", summary.retried),
        ("failures", summary.failures),
        ("clips", summary.clips),
        ("near-duplicates removed", summary.duplicates),
        ("captions flagged / dropped", f"{summary.captions_flagged} / {summary.captions_dropped}"),
        ("hours in", f"{summary.hours_in:.4f}"),
        ("hours out", f"{summary.hours_out:.4f}"),
        ("wall seconds", f"{summary.wall_s:.1f}"),
        ("throughput (video s / wall s)", f"{summary.throughput:.2f}"),
        ("decoders (videos)", ", ".join(f"{name} {n}" for name, n in sorted(summary.decoders.items())) or "-"),
        ("workers", summary.workers_text()),
    ), title=f"vfm curate -> {summary.out}")
    print_table(table, Console())
    typer.echo(f"report: {Path(summary.out) / 'report.html'}")
    if summary.failures_line():
        typer.echo(f"failures: {summary.failures_line()}")
    if summary.other_options_line():
        typer.echo(f"options changed: {summary.other_options_line()}")
    if summary.changed_inputs_line():
        typer.echo(f"inputs changed: {summary.changed_inputs_line()}")
    if summary.copies_line():
        from vfm_plugins.text import printable

        typer.echo(printable(f"copies: {summary.copies_line()}"))  # it names two files: no terminal controls
    if summary.folders_not_read or summary.left_out:
        from vfm_plugins.text import printable

        for line in summary.not_read_lines():  # a folder name is the user's text: no terminal controls
            typer.echo(printable(f"not read: {line}"), err=True)
        if summary.left_out:
            typer.echo(printable(f"left out: {summary.left_out}"))
    if summary.changed_while_curated_line():
        typer.echo(f"changed while curated: {summary.changed_while_curated_line()}")
    if summary.decoded_short:
        typer.echo(f"decoded short: {summary.decoded_short} video{'s' if summary.decoded_short != 1 else ''} ended well "
                   f"before the length the file declares (truncated or damaged); their clips end there: listed in report.html")
    if summary.uncaptioned:
        from vfm_curator.io.report import UNCAPTIONED_ADVICE

        typer.echo(f"captions: {summary.uncaptioned} of {summary.clips} clips have none. {UNCAPTIONED_ADVICE}.")
    if summary.problem():  # nothing for `vfm shard` to read: never a quiet exit 0
        fail(summary.problem())


def _given(*pairs) -> str:
    """The given options among ``(name, value, name, value, ...)`` as Typer's param hint (e.g.
    ``--shot-detector / --shot-option``), or ``--config`` when none was given on the command line."""
    names = [pairs[i] for i in range(0, len(pairs), 2) if pairs[i + 1] not in (None, [])]
    return " / ".join(names) if names else "--config"


def _valid_alone(config: Path, out: Path) -> bool:
    """Whether the config file alone (no command-line option applied) passes the option checks."""
    from vfm_curator.config import CurateConfig
    from vfm_curator.pipelines.clipping import stage_specs

    try:
        stage_specs(CurateConfig.load(config), out)
        return True
    except (OSError, ValueError):
        return False


def apply_caption_options(cfg, captioner: str | None, url: str | None, model: str | None, prompt: str | None,
                          api_key_env: str | None) -> None:
    """``--captioner`` and its ``--caption-*`` options override the config's ``[options.caption]``."""
    given = {"--caption-url": url, "--caption-model": model, "--caption-prompt": prompt, "--caption-api-key-env": api_key_env}
    if captioner is None and all(v is None for v in given.values()):
        return
    if "caption" not in cfg.stages:
        raise ValueError(f"--captioner and --caption-* need the caption stage; the configured stages are {', '.join(cfg.stages)}")
    options = cfg.options.setdefault("caption", {})
    if captioner is not None:
        if captioner != options.get("captioner"):
            options["captioner_options"] = {}  # another captioner's options from the config do not apply
        options["captioner"] = captioner
    if not options.get("captioner"):
        named = [k for k, v in given.items() if v is not None]
        raise ValueError(f"{', '.join(named)} need{'s' if len(named) == 1 else ''} --captioner (or [options.caption] captioner)")
    extra = dict(options.get("captioner_options") or {})
    model_key = "model_path" if options["captioner"] == "vlm" else "model"
    for key, value in (("url", url), (model_key, model), ("prompt", prompt), ("api_key_env", api_key_env)):
        if value is not None:
            extra[key] = value
    options["captioner_options"] = extra


class GpusError(ValueError):
    """A ``--gpus`` value this machine cannot honour."""


def apply_gpus(cfg, gpus: int | None, ray_address: str | None = None) -> None:
    """``--gpus N`` -> ``run.num_gpus``. ``0``: no GPU anywhere, so an ``auto`` device of the embed,
    caption and stitch stages (given, or the embedder's or captioner's default) becomes ``cpu``,
    transcode's ``auto`` encoder ``libx264`` and decode's ``auto`` decoder ``pyav``. ``N > 0`` needs N visible CUDA devices here, unless the
    run goes to a Ray cluster (``--ray-address`` or ``run.ray_address``), whose GPUs Ray counts."""
    from vfm_curator.plugins import host
    from vfm_curator.stages.embed import option_device

    if gpus is None:
        return
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise GpusError(f"--gpus {gpus!r}; accepted: an integer >= 0 (0: CPU only)")
    if gpus > 0 and not (ray_address or cfg.ray_address):
        visible = _cuda_devices()
        if visible == 0:
            raise GpusError(f"--gpus {gpus} but no CUDA device is visible here (torch.cuda.is_available() is False "
                            f"or torch is not installed); use --gpus 0 or leave it out to run on the CPU")
        if gpus > visible:
            raise GpusError(f"--gpus {gpus} but only {visible} CUDA device(s) are visible here")
    cfg.num_gpus = gpus
    if gpus > 0:
        return
    for stage, kind, name_key, options_key in (("embed", "embedders", "embedder", "embedder_options"),
                                               ("caption", "captioners", "captioner", "captioner_options")):
        options = cfg.options.get(stage, {})
        name = options.get(name_key, "histogram" if stage == "embed" else None)
        model_options = options.get(options_key, {})
        if stage in cfg.stages and isinstance(model_options, dict) and option_device(kind, name, model_options) == "auto":
            cfg.options.setdefault(stage, {})[options_key] = {**model_options, "device": "cpu"}
    if cfg.options.get("stitch", {}).get("device") == "auto":  # its default is cpu
        cfg.options["stitch"]["device"] = "cpu"
    if "transcode" in cfg.stages and cfg.options.get("transcode", {}).get("encoder", "auto") == "auto":
        cfg.options.setdefault("transcode", {})["encoder"] = "libx264"  # auto would take NVENC where it opens
    decode = cfg.options.get("decode", {})
    if "decode" in cfg.stages and decode.get("decoder", "auto") == "auto" and decode.get("hwaccel") is None \
            and "decoder" in host.get("stages", "decode").defaults:  # auto would measure the GPU decoders
        cfg.options.setdefault("decode", {})["decoder"] = "pyav"


def _cuda_devices() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def register(app: typer.Typer) -> None:
    app.command("curate", no_args_is_help=True)(curate)
