"""``vfm demo``: the whole system on this machine, from raw videos to a generated video."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from vfm_cli.failing import fail


def demo(
    out: Path = typer.Option(Path("vfm-demo"), "-o", "--out", help="Folder for everything the demo makes."),
    videos: int = typer.Option(32, "--videos", min=1, max=32, help="How many input videos of moving shapes to make (one caption each, one generated video per caption)."),
    train_steps: Optional[int] = typer.Option(None, "--train-steps", min=1, help="Training steps (default: the demo config's 1200, with 10 warm-up steps); when given, warm-up becomes its first tenth."),
    sample_steps: int = typer.Option(24, "--sample-steps", min=1, help="Sampler steps for each generated video."),
    prompt: Optional[str] = typer.Option(None, "--prompt", help="Prompt to generate (default: every input video's caption)."),
    ray: bool = typer.Option(True, "--ray/--no-ray", help="Run curation and sharding on Ray (default) or in-process."),
) -> None:
    """Run curate -> shard -> train -> generate -> eval on generated sample videos, with the real pipelines.

    Generates one video per caption of the input videos and scores each against its caption with
    `vfm eval` (flat background, the shape's colour, its direction of motion). Prints each `vfm`
    command before it runs (so you can repeat any step by hand), then the scores, the time of each
    step and the files to open: the curation report, the loss curve, the generated MP4s, a contact
    sheet of all of them (a row per caption) and the scores. The whole demo takes about three to five minutes
    on an idle 2-core CPU (193 s measured, training 158 s for its 1200 steps of 4 clips); re-running into
    the same folder resumes.
    """
    from rich.console import Console
    from rich.table import Table

    from vfm_cli.demo.run import DemoError, DemoSettings, run_demo
    from vfm_cli.tables import print_table

    console = Console()
    settings = DemoSettings(out=out, videos=videos, train_steps=train_steps, sample_steps=sample_steps,
                            prompt=prompt, ray=ray)
    try:
        # soft_wrap: a command longer than the terminal is not broken by inserted newlines, so it can be
        # copied and run again as printed
        result = run_demo(settings, say=lambda text: console.print(text, soft_wrap=True))
    except DemoError as exc:
        fail(exc)

    summary = result.scores.get("summary", {})
    if summary.get("scored"):
        n = summary["scored"]
        console.print(f"[bold]prompt adherence[/bold] ({n} captions): colour {summary['colour_correct']}/{n}, "
                      f"direction {summary['motion_correct']}/{n}, flat background {summary['flat_background']}/{n}, "
                      f"one shape {summary['single_shape']}/{n}, all of these {summary['all_correct']}/{n}")
    times = Table(title="time per step")
    times.add_column("step")
    times.add_column("seconds", justify="right")
    for name, seconds in result.seconds.items():
        times.add_row(name, f"{seconds:.1f}")
    print_table(times, console)
    files = Table(title="open these")
    files.add_column("what")
    files.add_column("file")
    for name, path in result.outputs.items():
        files.add_row(name, str(path))
    print_table(files, console)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
