"""``vfm generate``: videos from an inference export, in one process or under torchrun."""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import List, NoReturn, Optional

import typer

# one error line per node under torchrun (fail_once), and a lost peer said in one line: as vfm train does
from vfm_cli.failing import fail, fail_once, own_traceback_first, peer_lost, who_was_lost
from vfm_plugins.text import printable


def _parse_size(size: Optional[str]) -> Optional[tuple[int, int]]:
    if size is None:
        return None
    parts = size.lower().split("x")
    if len(parts) != 2 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise typer.BadParameter(f"expected HxW with positive integers (e.g. 256x448), got {size!r}", param_hint="--size")
    return int(parts[0]), int(parts[1])


def _output_problem(out: Path, fps: float) -> str | None:
    """What is wrong with ``--out`` or ``--fps`` (checked before any work), or None."""
    from vfm_cli.paths import folder_problem

    if not (math.isfinite(fps) and fps >= 0.001):
        return f"--fps must be a finite number >= 0.001 frames per second, got {fps}"
    problem = folder_problem(out)
    return f"--out {problem}" if problem else None


def _parse_sampler_options(items: List[str]) -> dict:
    """``--sampler-option churn=40`` -> {"churn": 40}; values are read as TOML, else kept as a string."""
    import tomllib

    options = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise typer.BadParameter(f"expected KEY=VALUE (e.g. churn=40), got {item!r}", param_hint="--sampler-option")
        try:
            options[key.strip()] = tomllib.loads(f"v = {raw.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            options[key.strip()] = raw.strip()  # a bare word, e.g. timestep_spacing=trailing
    return options


def _read_prompts(prompt: Optional[List[str]], prompts: Optional[Path]) -> List[str]:
    """``--prompt`` may be given several times (one video each, in order); ``--prompts`` is a file."""
    if prompt and prompts is not None:
        raise typer.BadParameter("give --prompt TEXT (repeatable) or --prompts FILE, not both",
                                 param_hint="--prompt/--prompts")
    if not prompt and prompts is None:  # an unconditional model's user has no text to give, and asks how
        raise typer.BadParameter("no prompt given: give --prompt TEXT (repeatable: one video each) or --prompts FILE "
                                 "(one prompt per line); an unconditional model takes --prompt \"\" once per video "
                                 "(its seed is --seed plus the video's index)", param_hint="--prompt/--prompts")
    if prompt:
        return list(prompt)
    return read_prompts_file(prompts)


def read_prompts_file(path: Path) -> List[str]:
    """One prompt per line of UTF-8 text (a byte-order mark, as Windows editors write, is dropped); blank
    lines and ``#`` comments skipped (shared with ``vfm eval``)."""
    if path.is_dir():
        raise typer.BadParameter(f"prompts file {path} is a folder; give a text file with one prompt per line",
                                 param_hint="--prompts")
    if not path.exists():  # a pipe (--prompts <(...)) or a device is read like a file
        raise typer.BadParameter(f"prompts file {path} does not exist", param_hint="--prompts")
    try:  # utf-8-sig: a BOM would otherwise start the first prompt (and break a class index)
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise typer.BadParameter(f"prompts file {path} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
                                 f"{exc.start}); save it as UTF-8", param_hint="--prompts") from None
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    if not lines:
        raise typer.BadParameter(f"prompts file {path} has no prompts (one per line)", param_hint="--prompts")
    return lines


def generate(
    ctx: typer.Context,
    checkpoint: Path = typer.Option(..., "--checkpoint", help="Inference export folder (model.safetensors + config.json), a training checkpoint (RUN/checkpoints/step_<N>, any layout: verified whole and read in memory, its EMA weights when the run had EMA), or a diffusers model folder (converted in memory; see vfm convert)."),
    prompt: Optional[List[str]] = typer.Option(None, "--prompt", help="A prompt (a class index for class-conditional models); give it several times for several videos, in order."),
    prompts: Optional[Path] = typer.Option(None, "--prompts", help="A UTF-8 text file with one prompt per line (blank lines and lines starting with # are skipped)."),
    negative_prompt: str = typer.Option("", "--negative-prompt", help="The unconditional prompt for guidance."),
    sampler: Optional[str] = typer.Option(None, "--sampler", help="Sampler name (see `vfm plugins --kind samplers`); default per formulation."),
    steps: int = typer.Option(32, "--steps", min=1, help="Sampler steps."),
    sampler_option: List[str] = typer.Option([], "--sampler-option", help="A sampler option KEY=VALUE (repeatable), e.g. churn=40 (edm-heun, edm-euler), shift=3 (flow-*), eta=1 or timestep_spacing=trailing (ddim); an unknown KEY lists the sampler's options."),
    guidance: Optional[float] = typer.Option(None, "--guidance", help="Classifier-free guidance scale: 1 = off, 0 = the unconditional branch alone, above 1 follows the prompt more closely; below 0 steers away from the prompt (allowed, with a warning: for that, a --negative-prompt is usually meant); default: the export's (the formulation's default when training dropped conditions, else 1)."),
    seed: int = typer.Option(0, "--seed", help="Noise seed; prompt i uses seed + i. The same seed gives the same video."),
    frames: Optional[int] = typer.Option(None, "--frames", min=1, help="Frames; default: the training clips' length."),
    size: Optional[str] = typer.Option(None, "--size", help="HxW in pixels; default: the training size."),
    fps: float = typer.Option(24.0, "--fps", help="Frame rate of the MP4."),
    cfg_parallel: bool = typer.Option(False, "--cfg-parallel", help="Under torchrun: the two guidance branches on different ranks."),
    cp_strategy: str = typer.Option("cp-ring", "--cp-strategy", help="Context-parallel attention strategy used on the remaining ranks."),
    decode_tile: Optional[int] = typer.Option(None, "--decode-tile", help="Decode in spatial tiles of this many latent pixels."),
    decode_chunk: Optional[int] = typer.Option(None, "--decode-chunk", help="Decode this many latent frames at a time."),
    device: str = typer.Option("auto", "--device", help="auto (CUDA when present; under torchrun each rank its GPU), cuda, cuda:N or cpu."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="Transformer precision: bf16 or fp32 (default: bf16 on CUDA, fp32 on CPU)."),
    compile_blocks: bool = typer.Option(False, "--compile", help="torch.compile each transformer block (the first video pays for compiling)."),
    out: Path = typer.Option(Path("videos"), "-o", "--out", help="Output folder for MP4s and contact sheets."),
    weights_root: Optional[List[Path]] = typer.Option(None, "--weights-root", help="A folder outside the export that its config.json may name paths in (repeatable; default: only the export folder)."),
    trust_torchscript: bool = typer.Option(False, "--trust-torchscript", help="Let a TorchScript tokenizer (cosmos) load: it is code (default: refused; docs/security.md)."),
    tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="For a diffusers model folder: the vfm tokenizer to decode with (an export names its own)."),
    resume: bool = typer.Option(False, "--resume", help="Keep the videos an earlier run of the same request finished in OUT (OUT/generate.json records them; e.g. after Ctrl-C) and generate the others; a request that differs is refused, naming what differs."),
) -> None:
    """Generate videos from an inference export or a training checkpoint; writes OUT/<i>.mp4 and OUT/<i>.png
    (a contact sheet)."""
    import time

    from vfm_infer.distributed import layout_sizes, setup_inference
    from vfm_infer.checks import GenerationWarning
    from vfm_infer.pipeline import DTYPES, ExportError, GenerationSpec, NonFiniteOutputError, VideoPipeline, check_spec
    from vfm_infer.plugins import host
    from vfm_infer.video.contact_sheet import contact_sheet, write_png
    from vfm_infer.video.frames import to_uint8_frames
    from vfm_infer.video.mp4 import write_mp4
    from vfm_parallel.preflight import PreflightError, checked_together

    # Every option that needs no model, before the export loads (and long before sampling). Under torchrun
    # the ranks agree on them before going on: a node may fail alone (its --prompts file, rank 0's lock).
    failure = None
    try:
        prompt_list = _read_prompts(prompt, prompts)
        size_hw = _parse_size(size)
        sampler_options = _parse_sampler_options(sampler_option)
        if dtype is not None and dtype not in DTYPES:
            raise typer.BadParameter(f"expected one of {', '.join(DTYPES)}, got {dtype!r}", param_hint="--dtype")
        problem = _output_problem(out, fps)
        if problem:
            raise ValueError(problem)
        spec = GenerationSpec(sampler=sampler, steps=steps, guidance=guidance, seed=seed, frames=frames, size=size_hw,
                              negative_prompt=negative_prompt, decode_chunk_frames=decode_chunk, decode_tile=decode_tile,
                              sampler_options=sampler_options)
        check_spec(spec, len(prompt_list))
        from vfm_infer.context_parallel import cp_strategy as known_cp_strategy
        from vfm_parallel.process_group import env_world_size

        known_cp_strategy(cp_strategy)  # also in one process, where it is not used: a typo is named now

        _, token_shards = layout_sizes(env_world_size(), cfg_parallel)
        _hold_output_folder(ctx, out)
        host.get("samplers", sampler) if sampler else None
    except Exception as exc:  # any error, agreed on first: one node's may be its own (an unreadable --prompts)
        failure = exc
    failure = _agree_to_start(failure, device)
    _own_traceback_first(failure)
    if isinstance(failure, typer.BadParameter):
        raise failure  # a usage error, as click shows it (exit 2)
    if isinstance(failure, (ValueError, KeyError, PreflightError)):
        fail_once(str(failure))
    if failure is not None:
        raise failure  # not a refusal but a bug or an I/O error: its traceback, as in one process
    try:
        from vfm_cli.commands.convert import external_pipeline
        from vfm_models.adapters.exports import is_external_folder

        from vfm_cli.checkpoint_export import looks_like_checkpoint

        # first: on a node without the path, the --tokenizer check below would fail that node alone
        _same_source_on_every_rank(checkpoint, device)
        if tokenizer is not None and not is_external_folder(checkpoint):
            raise ValueError("--tokenizer applies to a diffusers model folder; an export names its own tokenizer")
        if looks_like_checkpoint(checkpoint):
            pipe = _checkpoint_pipeline(checkpoint, device=device, dtype=dtype, compile=compile_blocks,
                                        weights_roots=weights_root or (), allow_torchscript=trust_torchscript)
        elif is_external_folder(checkpoint):
            with checked_together():  # each rank converts its copy: a node's may fail alone (damaged)
                pipe = external_pipeline(checkpoint, tokenizer, device=device, dtype=dtype, compile=compile_blocks)
        else:
            with checked_together():  # each rank reads the export: a node's copy may fail alone (damaged)
                pipe = VideoPipeline.from_export(checkpoint, device=device, dtype=dtype, compile=compile_blocks,
                                                 weights_roots=weights_root or (), allow_torchscript=trust_torchscript)
    except (ExportError, KeyError, ValueError, PreflightError) as exc:
        _own_traceback_first(exc)
        fail_once(str(exc))
    import warnings

    try:  # the checks that need the model: sampler, sizes against tokenizer, patch and memory
        with warnings.catch_warnings():  # shown below as one plain line, once, by the writing rank
            warnings.simplefilter("ignore", GenerationWarning)
            prepared = pipe.prepare(spec, prompt_list, token_shards=token_shards, cfg_parallel=cfg_parallel)
        _check_writable_channels(pipe)
        rank = setup_inference(pipe, prepared, cfg_parallel=cfg_parallel, cp_strategy=cp_strategy)
    except ValueError as exc:
        fail_once(str(exc))
    if rank == 0:
        for note in prepared.warnings:
            typer.echo(f"warning: {printable(note)}", err=True)
    from vfm_cli import generate_record

    asked = generate_record.request(checkpoint, out, prepared, pipe, fps=fps) if rank == 0 else None
    kept, problem = _kept_by_rank_0(rank, out, asked, prompt_list, resume)
    if problem:
        fail_once(problem)

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    written, step_seconds = [], []
    # This run writes 0000.mp4 ... : say which of them replace an earlier run's videos.
    replaced = [p for p in _numbered_videos(out) if int(p.stem) < len(prompt_list) and int(p.stem) not in kept] \
        if rank == 0 else []
    finished = {}  # OUT/generate.json's videos: those kept, then each one this run finishes
    if rank == 0:
        _remove_partial_files(out)
        generate_record.remove_leftover_records(out)
        for k in kept:
            written += [out / f"{k:04d}.mp4", out / f"{k:04d}.png"]
            finished[f"{k:04d}"] = generate_record.finished_entry(out, k, prompt_list[k])
        if resume:
            typer.echo(f"resuming: {_videos(len(kept))} of this request already in {out} kept"
                       f"{f' ({_span(written[::2])})' if kept else ''}; generating the other "
                       f"{len(prompt_list) - len(kept)}", err=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  disable=rank != 0, transient=False) as progress, _signals_raise() as stopped:
        i = 0
        try:
            for i, text in enumerate(prompt_list):
                if i in kept:
                    continue
                task = progress.add_task(f"video {i + 1}/{len(prompt_list)}", total=steps)
                start = time.perf_counter()
                latent = pipe.sample_latent(prepared, text, index=i, callback=lambda k, n: progress.update(task, completed=k))
                pipe.synchronize()
                step_seconds.append((time.perf_counter() - start) / steps)
                if rank != 0:
                    continue
                frames_u8 = to_uint8_frames(pipe.decode(latent, spec))
                # each file is renamed into place once whole: a stop leaves no partial video
                written.append(write_mp4(out / f"{i:04d}.mp4", frames_u8, fps=fps))
                written.append(write_png(out / f"{i:04d}.png", contact_sheet(frames_u8)))
                finished[f"{i:04d}"] = generate_record.finished_entry(out, i, text)
                generate_record.write_record(out, asked, finished)
        except NonFiniteOutputError as exc:  # an inf or nan latent or video is an error, not a black MP4
            progress.stop()
            fail_once(str(exc))
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (torchrun sends it to every rank when one fails)
            progress.stop()
            _stopped(rank, stopped.name, i, len(prompt_list), out, written, resumable=bool(finished))
        except RuntimeError as exc:  # a collective whose peer is gone: one line, not gloo's traceback
            lost = peer_lost(exc)
            if lost is None:
                raise
            progress.stop()
            fail(f"rank {rank} lost contact with another rank of this job, which stopped or was killed "
                 f"({who_was_lost()}): {lost}" + (f"; {_kept(written, out)}" if rank == 0 else ""))
    if rank == 0:
        for path in written:
            typer.echo(str(path))
        if replaced:
            typer.echo(f"note: replaced {_videos(len(replaced))} of an earlier run in {out} ({_span(replaced)}) "
                       "with this run's; use another --out to keep both", err=True)
        stale = _earlier_videos(out, len(prompt_list))
        if stale:
            typer.echo(f"note: {out} also holds {_videos(len(stale))} of an earlier run ({stale[0].name}"
                       f"{' ... ' + stale[-1].name if len(stale) > 1 else ''}), left as they were; this run wrote "
                       f"0000.mp4 to {len(prompt_list) - 1:04d}.mp4", err=True)
        if not step_seconds:
            return  # every video was kept (--resume): nothing was timed
        evaluations = prepared.sampler.num_evaluations()
        typer.echo(f"seconds per step: {_steady_step_seconds(step_seconds, compile_blocks)} "
                   f"{evaluations} denoiser evaluation{'s' * (evaluations != 1)} per video{_guidance_note(pipe, prepared)}, "
                   f"sampler {type(prepared.sampler).__name__}, {pipe.device} {str(pipe.dtype).removeprefix('torch.')}")
    # a torchrun rank ends in ends_torchrun_rank, by every way out (this one, a stop's, an error's)


def _hold_output_folder(ctx: typer.Context, out: Path) -> None:
    """One run per output folder, held by the rank that writes it (rank 0) from before the export loads
    until the command ends (vfm_plugins.FolderLock; the kernel frees it if the process dies). A
    ValueError when another run holds it, or it cannot be written."""
    import os

    from vfm_plugins import FolderLock, FolderLockedError

    if int(os.environ.get("RANK", "0")) != 0:
        return
    try:
        ctx.call_on_close(FolderLock(out).acquire().release)
    except FolderLockedError as exc:
        raise ValueError(str(exc)) from None
    except OSError as exc:  # e.g. -o names a file
        raise ValueError(f"cannot write the output folder {out}: {exc.strerror or exc}") from None


def _own_traceback_first(agreed: Exception | None) -> None:
    """A rank whose own failure under an agreed error is a bug or an I/O error prints its traceback first
    (:func:`vfm_cli.failing.own_traceback_first`, as vfm train does); bad input stays one line: a usage error,
    a ValueError or KeyError, a plugin's error."""
    from vfm_plugins import PluginError

    own_traceback_first(agreed, (ValueError, KeyError, PluginError))


def _agree_to_start(failure: Exception | None, device: str) -> Exception | None:
    """Under torchrun, what every rank reports for the checks before the export loads
    (vfm_parallel.preflight.agree: the process group starts there); in one process, ``failure``."""
    from vfm_parallel.process_group import env_world_size

    if env_world_size() <= 1:
        return failure
    import torch
    import torch.distributed as dist

    from vfm_parallel.preflight import agree

    # the backend by the --device asked for (its checks are the pipeline's, after this); gloo on a torch
    # without NCCL, where --device cuda is then refused by that check on every rank alike
    cuda = dist.is_nccl_available() and (device.startswith("cuda") or (device == "auto" and torch.cuda.is_available()))
    return agree(failure, "cuda" if cuda else "cpu")


def _same_source_on_every_rank(checkpoint: Path, device: str) -> None:
    """Under torchrun, a ValueError unless every rank finds the same kind of thing at ``--checkpoint``
    (a node that lacks a copy of it on node-local disk). Checked before any rank loads it: a rank that
    failed to load alone left the others waiting for it in the process group's start (gloo: 30
    minutes), or in a collective of the checkpoint's loading. The process group is up (_agree_to_start)."""
    from vfm_infer.pipeline import resolve_device
    from vfm_models.adapters.exports import is_external_folder
    from vfm_parallel.process_group import env_world_size

    from vfm_cli.checkpoint_export import looks_like_checkpoint

    if env_world_size() <= 1:
        return
    import socket

    import torch.distributed as dist

    resolve_device(device)  # this rank's GPU is set before the gather: under NCCL it runs on the current device
    kind = ("no such path" if not checkpoint.exists() else "a training checkpoint" if looks_like_checkpoint(checkpoint)
            else "a diffusers model folder" if is_external_folder(checkpoint) else "an export folder")
    seen: list = [None] * dist.get_world_size()
    dist.all_gather_object(seen, (str(checkpoint.resolve()), kind, socket.gethostname()))
    if len({kind for _, kind, _ in seen}) > 1:
        each = "; ".join(f"rank {r} (host {host}): {path}, {kind}" for r, (path, kind, host) in enumerate(seen))
        raise ValueError(f"--checkpoint is not the same on every rank ({each}); on several nodes give a path every "
                         f"node reads (a shared filesystem, or the same copy on each node)")


def _checkpoint_pipeline(checkpoint: Path, *, device: str, weights_roots, **kwargs):
    """The pipeline of a training checkpoint's export, built in memory: the model and settings that
    ``vfm export CHECKPOINT --format vfm`` writes (so the same seed gives the same video), with nothing
    written (no temporary copy of the weights to leave behind on an error, a Ctrl-C or a kill, nor to
    share between nodes). Paths in the recorded settings resolve as in the run's own export
    (:func:`export_origin`). Under torchrun every rank reads it: the process group starts here, so
    the checkpoint is verified once, each rank hashing its share of the files, and each rank reads the
    weights in place, as it would read an export's."""
    import os

    from vfm_infer.pipeline import VideoPipeline, resolve_device
    from vfm_parallel.process_group import env_world_size, init_distributed

    from vfm_cli.checkpoint_export import describe, export_origin, read_checkpoint

    if env_world_size() > 1:
        init_distributed(resolve_device(device).type)
    read = read_checkpoint(checkpoint)
    if int(os.environ.get("RANK", "0")) == 0:
        typer.echo(f"generating from {describe(read, checkpoint)}", err=True)
    return VideoPipeline.from_unsaved_export(read.model, read.meta, folder=export_origin(checkpoint),
                                             weights_roots=weights_roots, device=device, **kwargs)


class _Signal:
    """Which signal stopped the run (Ctrl-C's SIGINT unless SIGTERM was seen)."""

    name: str = "SIGINT"


def _check_writable_channels(pipe) -> None:
    """The videos are MP4s: grey or RGB. A tokenizer that decodes other channels (e.g. a pixel tokenizer
    trained on 4-channel data) is refused before sampling, not after the first video's steps."""
    channels = getattr(pipe.tokenizer, "channels", 3)
    if channels not in (1, 3):
        raise ValueError(f"the export's tokenizer {pipe.meta.get('tokenizer')!r} decodes {channels}-channel video; "
                         "vfm generate writes MP4s, which take 1 (grey) or 3 (RGB) channels (VideoPipeline.generate "
                         "returns the decoded tensor for other uses)")


@contextlib.contextmanager
def _signals_raise():
    """SIGTERM raises KeyboardInterrupt while generating, as Ctrl-C does, so a stop unwinds (the video
    being written is removed, the folder lock released) instead of ending the process where it stands;
    yields which signal it was. Outside the main thread nothing changes."""
    import signal
    import threading

    seen = _Signal()
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    def raise_interrupt(signum, frame):
        seen.name = signal.Signals(signum).name
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not break off the unwinding
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGTERM, previous)


def _kept(written: list[Path], out: Path) -> str:
    videos = [p for p in written if p.suffix == ".mp4"]
    if not videos:
        return "no video was written"
    return f"the {len(videos)} finished video{'s' * (len(videos) != 1)} in {out} ({_span(videos)}) are whole"


def _stopped(rank: int, signal_name: str, index: int, total: int, out: Path, written: list[Path], *,
             resumable: bool = False) -> NoReturn:
    """A stop on Ctrl-C or SIGTERM: one line from rank 0, exit 130 / 143 as the shell reports a signal."""
    import signal

    if rank == 0:
        how = "; to generate the others, run the same command with --resume" if resumable else ""
        typer.echo(f"interrupted by {signal_name} during video {index + 1} of {total}: stopped with no partial video "
                   f"left; {_kept(written, out)}{how}", err=True)
    raise typer.Exit(128 + signal.Signals[signal_name].value)


def _kept_by_rank_0(rank: int, out: Path, asked, prompts: list[str], resume: bool) -> tuple[list[int], str | None]:
    """With ``--resume``, the indices of the videos to keep, or the error that refuses the request: decided by
    rank 0, which alone reads and writes ``out``, and sent to every rank (all skip the same videos)."""
    from vfm_cli import generate_record

    kept, problem = [], None
    if resume and rank == 0:
        try:
            kept = generate_record.kept_videos(out, asked, prompts)
        except ValueError as exc:
            problem = str(exc)
    from vfm_parallel.process_group import env_world_size

    if resume and env_world_size() > 1:
        import torch.distributed as dist

        sent = [kept, problem]
        dist.broadcast_object_list(sent, src=0)
        kept, problem = sent
    return kept, problem


def _steady_step_seconds(step_seconds: list[float], compiled: bool) -> str:
    """The mean seconds per step of the videos after the first, whose first calls pay one-time costs
    (kernel set-up, with --compile the compilation: 19 s a step against 0.03 for a tiny model), shown
    apart; with one video its time, marked as including them."""
    warm_up = "warm-up and compilation" if compiled else "warm-up"
    first, rest = step_seconds[0], step_seconds[1:]
    if not rest:
        return f"{first:.4f} for the one video, with its {warm_up} (the steady rate needs two videos or more);"
    which = "video 2" if len(rest) == 1 else f"videos 2-{len(step_seconds)}"
    return f"{sum(rest) / len(rest):.4f} over {which} (the first, with its {warm_up}: {first:.4f});"


def _guidance_note(pipe, prepared) -> str:
    """What one denoiser evaluation is: one forward, or the conditional and unconditional branches
    of classifier-free guidance (one batch of 2, or one branch per rank with --cfg-parallel)."""
    scale = prepared.spec.guidance
    if pipe.conditioner.kind == "none" or scale is None or scale == 1.0:
        return ", guidance off: one forward each"
    if pipe.parallel.cfg_group is not None:
        return f", guidance {scale:g}: each rank runs one branch"
    if scale == 0.0:
        return ", guidance 0: the unconditional branch alone, one forward each"
    return f", guidance {scale:g}: each a batch of 2 (conditional and unconditional)"


def _numbered_videos(out: Path) -> list[Path]:
    """The videos named like this command's (0000.mp4, 0001.mp4, ...) in ``out``, in number order."""
    import re

    numbered = [p for p in out.glob("*.mp4") if re.fullmatch(r"\d{4,}\.mp4", p.name)]
    return sorted(numbered, key=lambda p: int(p.stem))


def _remove_partial_files(out: Path) -> None:
    """Remove what a killed earlier run left half-written (``.0003.partial.<random>.mp4``: write_mp4
    renames a file into place once whole, a SIGKILL ends it before); this run holds the folder's lock.
    The partial names are read with the rule that writes them; only regular files bound for this
    command's names go (a link is removed by nothing here, nor followed)."""
    import re

    from vfm_infer.video.mp4 import partial_final_name
    from vfm_plugins.files import remove_leftover

    for path in out.glob(".*.partial.*"):
        final = partial_final_name(path.name)
        if final is not None and re.fullmatch(r"\d{4,}\.(mp4|png)", final):
            remove_leftover(path)


def _videos(count: int) -> str:
    return f"{count} video{'s' * (count != 1)}"


def _span(paths: list[Path]) -> str:
    return paths[0].name + (f" ... {paths[-1].name}" if len(paths) > 1 else "")


def _earlier_videos(out: Path, count: int) -> list[Path]:
    """Numbered videos past this run's ``count`` (from an earlier run into the same folder)."""
    return [p for p in _numbered_videos(out) if int(p.stem) >= count]


def register(app: typer.Typer) -> None:
    from vfm_cli.torchrun_exit import ends_torchrun_rank

    app.command("generate", no_args_is_help=True)(ends_torchrun_rank(generate))
