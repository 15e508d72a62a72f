"""Runs the demo as a user would: each stage is the real ``vfm`` command in its own process.

The commands are printed before they run, so every step can be repeated by hand. Each stage reads
only the previous stage's files; re-running the demo into the same folder resumes (curate and shard
skip finished work, train resumes from its last checkpoint). The last stage, ``vfm eval``, scores
every generated video against its caption (flat background, the shape's colour and direction).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable

from rich.markup import escape
from vfm_plugins.files import replace_file

from vfm_cli.demo.inputs import make_inputs

PROMPT_FALLBACK = "a red circle moving right"


class DemoError(RuntimeError):
    """A stage failed; what earlier stages wrote stays in place."""


@dataclass
class DemoSettings:
    out: Path
    videos: int = 32  # every subject: 8 or 16 videos trained a model that varied with train.seed (train.toml)
    train_steps: int | None = None  # None: the demo config's own number
    sample_steps: int = 24
    prompt: str | None = None  # None: every caption of the input videos
    ray: bool = True  # False: curate and shard in-process (no Ray), for the quickest smoke test


@dataclass
class DemoResult:
    seconds: dict[str, float] = field(default_factory=dict)
    outputs: dict[str, Path] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)
    scores: dict = field(default_factory=dict)  # the shapes metric: {"summary": {...}, "per_video": [...]}

    def as_dict(self) -> dict:
        return {
            "seconds": {k: round(v, 2) for k, v in self.seconds.items()},
            "outputs": {k: str(v) for k, v in self.outputs.items()},
            "commands": self.commands,
            "scores": self.scores,
        }


def _config_text(name: str) -> str:
    return resources.files("vfm_cli.demo").joinpath(name).read_text(encoding="utf-8")


def run_demo(settings: DemoSettings, say: Callable[[str], None] = print) -> DemoResult:
    """curate -> shard -> train -> generate on generated sample videos; returns times and outputs.
    Its files are written new and renamed into place (``replace_file``): a demo folder from elsewhere
    holding ``prompts.txt -> ~/.bashrc`` has the link replaced, never written through."""
    out = settings.out.resolve()
    if out.exists() and not out.is_dir():
        raise DemoError(f"{out} exists and is not a folder; give -o a new or an earlier demo folder")
    configs = out / "configs"
    try:
        configs.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DemoError(f"cannot create the demo folder {out}: {exc.strerror}") from exc
    runner = "ray" if settings.ray else "serial"
    for name in ("curate.toml", "shard.toml", "train.toml"):
        text = _config_text(name).replace("{runner}", runner)
        replace_file(configs / name, text)
    result = DemoResult()

    def stage(name: str, args: list[str]) -> None:
        command = ["vfm", *args]
        printable = shlex.join(command)
        result.commands.append(printable)
        say(f"\n[bold]== {name}[/bold]  $ {escape(printable)}")  # a path may hold [...]
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "vfm_cli.main", *args])
        result.seconds[name] = time.perf_counter() - start
        if done.returncode != 0:
            raise DemoError(f"the {name} step failed (exit {done.returncode}); command: {printable}")

    start = time.perf_counter()
    say(f"[bold]== input[/bold]  {settings.videos} videos of moving shapes, 3 shots each -> {escape(str(out / 'input'))}")
    manifest = make_inputs(out / "input", settings.videos, frames_per_shot=32)
    result.seconds["input"] = time.perf_counter() - start
    captions = [json.loads(line)["caption"] for line in manifest.read_text().splitlines()]
    prompts = [settings.prompt] if settings.prompt else list(dict.fromkeys(captions))
    prompts_file = out / "prompts.txt"
    replace_file(prompts_file, "".join(p + "\n" for p in prompts))

    stage("curate", ["curate", str(manifest), "-o", str(out / "curated"), "--config", str(configs / "curate.toml")])
    stage("shard", ["shard", str(out / "curated"), "-o", str(out / "shards"), "--config", str(configs / "shard.toml")])
    train_args = ["train", str(configs / "train.toml"),
                  "--set", f"data.blend={out / 'shards' / 'blend.yaml'}",
                  "--set", f"train.out_dir={out / 'train'}"]
    if settings.train_steps is not None:  # a shorter (or longer) run warms up over its first tenth
        train_args += ["--set", f"train.steps={settings.train_steps}",
                       "--set", f"optim.warmup_steps={max(1, settings.train_steps // 10)}"]
    stage("train", train_args)
    # guidance: the export's default (the formulation's, as the model was trained with condition dropout)
    # Measured against the alternatives on a demo export (8 prompts x 3-9 seeds, `vfm eval` shapes):
    # flow-euler 24 steps at guidance 2 gives all_correct 1.2 +- 0.8 of 8 (9 seeds), background RMS 9.8;
    # guidance 1.5: 1.2 +- 0.7, RMS 9.4; 12 steps at 1-1.5: 1.7-2.3 +- 1.4; flow-heun 24 or 48 Euler steps:
    # 1.0-1.7, RMS 10.1-10.4; guidance 1 loses colour or motion on some seeds, 3-4 no flat backgrounds.
    # None is better beyond seed noise, so the defaults stay. The stray pixels in the last frames are
    # the model's (at every setting): ghosts of the shape where it is in frames 0-1.
    # The grainy background was the model's (train.toml says why; uniform_fraction = 0.4 fixed most of it:
    # RMS 7.7, flat 5 of 8 at seed 0). Before that (seed 0: RMS 10.7, flat 2 of 8), more steps at low noise make it grainier (48/96 steps RMS 11.7/12.5, sampler shift 1
    # 12.1) and fewer help a little (shift 6 9.6); guidance only above s = 0.3, guidance 1 on the last step,
    # or ending at s = 0.2-0.3 with one jump to 0 give RMS 9.7-10.1, flat at most 3 of 8.
    # On the uniform_fraction export, 12 steps: flat 2/3/5 of 8 at seeds 0/1/2 (24: 5/5/6), RMS 8.9/8.9/8.0.
    stage("generate", ["generate", "--checkpoint", str(out / "train" / "export"), "--prompts", str(prompts_file),
                       "--steps", str(settings.sample_steps), "-o", str(out / "videos")])
    stage("eval", ["eval", str(out / "videos"), "--prompts", str(prompts_file), "--metric", "shapes",
                   "-o", str(out / "videos" / "scores.json")])
    result.scores = json.loads((out / "videos" / "scores.json").read_text())["shapes"]
    sheet = write_contact_sheet(out / "videos", len(prompts))

    result.seconds["total"] = sum(result.seconds.values())
    result.outputs = {
        "curation report": out / "curated" / "report.html",
        "clip table": out / "curated" / "clips.parquet",
        "blend file": out / "shards" / "blend.yaml",
        "loss curve": out / "train" / "loss_curve.png",
        "generated video": out / "videos" / "0000.mp4",
        "contact sheet": sheet,
        "scores": out / "videos" / "scores.json",
    }
    missing = [f"{k}: {v}" for k, v in result.outputs.items() if not v.exists()]
    if missing:
        raise DemoError("the demo finished but these outputs are missing: " + "; ".join(missing))
    replace_file(out / "demo.json", json.dumps({"prompts": prompts, **result.as_dict()}, indent=2))
    return result


def write_contact_sheet(videos: Path, count: int, *, scale: int = 3, gap: int = 2) -> Path:
    """One PNG with a row per generated video (every frame, enlarged ``scale`` times, nearest
    neighbour), in prompt order: ``videos/contact_sheet.png``."""
    import numpy as np

    from vfm_infer.video.contact_sheet import write_png
    from vfm_infer.video.mp4 import read_mp4

    rows = []
    for i in range(count):
        frames = read_mp4(videos / f"{i:04d}.mp4").repeat(scale, axis=1).repeat(scale, axis=2)  # (T, H, W, 3)
        t, h, w, _ = frames.shape
        row = np.full((h, t * w + (t - 1) * gap, 3), 255, dtype=np.uint8)
        for j, frame in enumerate(frames):
            row[:, j * (w + gap) : j * (w + gap) + w] = frame
        rows.append(row)
    width = max(r.shape[1] for r in rows)
    sheet = np.full((sum(r.shape[0] for r in rows) + gap * (len(rows) - 1), width, 3), 255, dtype=np.uint8)
    top = 0
    for row in rows:
        sheet[top : top + row.shape[0], : row.shape[1]] = row
        top += row.shape[0] + gap
    return write_png(videos / "contact_sheet.png", sheet)
