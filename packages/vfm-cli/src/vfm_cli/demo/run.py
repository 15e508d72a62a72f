"""Runs the demo as a user would: each stage is the real ``vfm`` command in its own process.

The commands are printed before they run, so every step can be repeated by hand. Each stage reads
only the previous stage's files; re-running the demo into the same folder resumes (curate and shard
skip finished work, train resumes from its last checkpoint).
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

from vfm_cli.demo.inputs import make_inputs

PROMPT_FALLBACK = "a red circle moving right"


class DemoError(RuntimeError):
    """A stage failed; what earlier stages wrote stays in place."""


@dataclass
class DemoSettings:
    out: Path
    videos: int = 8
    train_steps: int | None = None  # None: the demo config's own number
    sample_steps: int = 24
    prompt: str | None = None  # None: the caption of the first input video
    ray: bool = True  # False: curate and shard in-process (no Ray), for the quickest smoke test


@dataclass
class DemoResult:
    seconds: dict[str, float] = field(default_factory=dict)
    outputs: dict[str, Path] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "seconds": {k: round(v, 2) for k, v in self.seconds.items()},
            "outputs": {k: str(v) for k, v in self.outputs.items()},
            "commands": self.commands,
        }


def _config_text(name: str) -> str:
    return resources.files("vfm_cli.demo").joinpath(name).read_text(encoding="utf-8")


def run_demo(settings: DemoSettings, say: Callable[[str], None] = print) -> DemoResult:
    """curate -> shard -> train -> generate on generated sample videos; returns times and outputs."""
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
        (configs / name).write_text(text, encoding="utf-8")
    result = DemoResult()

    def stage(name: str, args: list[str]) -> None:
        command = ["vfm", *args]
        printable = shlex.join(command)
        result.commands.append(printable)
        say(f"\n[bold]== {name}[/bold]  $ {printable}")
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "vfm_cli.main", *args])
        result.seconds[name] = time.perf_counter() - start
        if done.returncode != 0:
            raise DemoError(f"the {name} step failed (exit {done.returncode}); command: {printable}")

    start = time.perf_counter()
    say(f"[bold]== input[/bold]  {settings.videos} videos of moving shapes, 3 shots each -> {out / 'input'}")
    manifest = make_inputs(out / "input", settings.videos, frames_per_shot=32)
    result.seconds["input"] = time.perf_counter() - start
    prompt = settings.prompt or json.loads(manifest.read_text().splitlines()[0])["caption"]

    stage("curate", ["curate", str(manifest), "-o", str(out / "curated"), "--config", str(configs / "curate.toml")])
    stage("shard", ["shard", str(out / "curated"), "-o", str(out / "shards"), "--config", str(configs / "shard.toml")])
    train_args = ["train", str(configs / "train.toml"),
                  "--set", f"data.blend={out / 'shards' / 'blend.yaml'}",
                  "--set", f"train.out_dir={out / 'train'}"]
    if settings.train_steps is not None:  # a shorter (or longer) run warms up over its first tenth
        train_args += ["--set", f"train.steps={settings.train_steps}",
                       "--set", f"optim.warmup_steps={max(1, settings.train_steps // 10)}"]
    stage("train", train_args)
    stage("generate", ["generate", "--checkpoint", str(out / "train" / "export"), "--prompt", prompt,
                       "--steps", str(settings.sample_steps), "--guidance", "2", "-o", str(out / "videos")])

    result.seconds["total"] = sum(result.seconds.values())
    result.outputs = {
        "curation report": out / "curated" / "report.html",
        "clip table": out / "curated" / "clips.parquet",
        "blend file": out / "shards" / "blend.yaml",
        "loss curve": out / "train" / "loss_curve.png",
        "generated video": out / "videos" / "0000.mp4",
        "contact sheet": out / "videos" / "0000.png",
    }
    missing = [f"{k}: {v}" for k, v in result.outputs.items() if not v.exists()]
    if missing:
        raise DemoError("the demo finished but these outputs are missing: " + "; ".join(missing))
    (out / "demo.json").write_text(json.dumps({"prompt": prompt, **result.as_dict()}, indent=2), encoding="utf-8")
    return result
