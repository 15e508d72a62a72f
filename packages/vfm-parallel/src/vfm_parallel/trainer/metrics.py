"""Where training metrics go: the console, a JSON-lines file, TensorBoard, and a loss-curve PNG.

Each sink has ``log(step, metrics)`` and ``close()``; only rank 0 logs. The CLI adds its own
progress-bar sink, so this package needs neither rich nor tqdm.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Protocol, TextIO

from vfm_plugins.files import fresh_file


class Sink(Protocol):
    def log(self, step: int, metrics: dict[str, float]) -> None: ...

    def close(self) -> None: ...


def format_metrics(step: int, total: int, metrics: dict[str, float]) -> str:
    parts = [f"step {step}/{total}"]
    labels = {"mfu": "MFU(6N+12LhS)", "mfu_executed": "MFU(executed)", "val_loss": "val", "preview_s": "preview s"}
    for key, fmt in (("loss", ".5f"), ("val_loss", ".5f"), ("grad_norm", ".3f"), ("lr", ".2e"), ("tokens_per_s", ".1f"),
                     ("mfu", ".2%"), ("mfu_executed", ".2%"), ("preview_s", ".1f")):
        if key in metrics:
            parts.append(f"{labels.get(key, key)} {metrics[key]:{fmt}}")
    return "  ".join(parts)


class ConsoleSink:
    """One line per logged step."""

    def __init__(self, total_steps: int, stream: TextIO | None = None) -> None:
        self.total = total_steps
        self.stream = stream or sys.stdout

    def log(self, step: int, metrics: dict[str, float]) -> None:
        print(format_metrics(step, self.total, metrics), file=self.stream, flush=True)

    def close(self) -> None:
        pass


class JsonlSink:
    """``metrics.jsonl``: one object per logged step, appended (a resumed run continues the file)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():  # a run folder from elsewhere: appending would write into the file it points to
            from vfm_parallel.trainer.config.sections import ConfigError

            raise ConfigError("train.out_dir", f"{path} is a symbolic link (to {os.readlink(path)}); the trainer appends "
                                               "its metrics there: remove the link, or train into another folder")
        # O_NOFOLLOW: a link planted between the check and the open is refused by the kernel as well
        self.file = os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666), "a")

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.file.write(json.dumps({"step": step, **metrics}) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def board_tag(key: str) -> str:
    """A metric's TensorBoard tag: the held-out figures under ``val/``, the previews' under ``preview/``, the
    rest under ``train/`` (``val_loss`` -> ``val/loss``, ``val_loss_level_3`` -> ``val/loss_level_3``)."""
    for prefix in ("val", "preview"):
        if key.startswith(prefix + "_"):
            return f"{prefix}/{key[len(prefix) + 1:]}"
    return f"train/{key}"


class TensorBoardSink:
    """Scalars in TensorBoard event files, tagged by :func:`board_tag` (needs the ``[train]`` extra).

    ``purge_step``: a resumed run's first step. The run before may have logged steps past the
    checkpoint it resumes from (it was killed after them); TensorBoard drops those from that step on,
    so the curve shows the resumed run's values once instead of going back and drawing them twice.
    """

    def __init__(self, folder: Path, purge_step: int | None = None) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("TensorBoard logging (logging.tensorboard = true) needs tensorboard: "
                              "`pip install 'vfm-parallel[train]'`, or set logging.tensorboard = false") from exc
        self.writer = SummaryWriter(log_dir=str(folder), purge_step=purge_step)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(board_tag(key), value, step)

    def close(self) -> None:
        self.writer.close()


def read_history(path: Path, key: str = "loss") -> tuple[list[int], list[float]]:
    """(steps, values of ``key``) from a metrics.jsonl (the steps whose row has it). A resumed run appends
    from its checkpoint's step on: a step at or below the one before starts it, and what earlier runs logged from there on is theirs
    (steps a killed run took past its checkpoint, or a rolled-back run's abandoned ones), dropped as
    TensorBoard drops them by its purge step."""
    by_step: dict[int, float] = {}
    last = 0
    if path.exists():
        for line in path.read_text().splitlines():
            row = json.loads(line)
            step = int(row["step"])
            if step <= last:  # a resume: the history goes on from here
                by_step = {s: v for s, v in by_step.items() if s < step}
            last = step
            if key in row:
                by_step[step] = float(row[key])
    steps = sorted(by_step)
    return steps, [by_step[s] for s in steps]


def smoothed(losses: list[float], window: int) -> list[float]:
    """The trailing mean of ``window`` losses at each step, over the finite ones only (a skipped
    non-finite step would otherwise blank the curve for ``window`` steps); NaN where none is finite."""
    out = []
    for i in range(len(losses)):
        kept = [v for v in losses[max(0, i - window + 1) : i + 1] if math.isfinite(v)]
        out.append(sum(kept) / len(kept) if kept else float("nan"))
    return out


def require_matplotlib() -> None:
    """The loss curve is drawn after the last step: a missing matplotlib is said before the first
    (it ended a finished run with ModuleNotFoundError)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ImportError("the loss curve (logging.loss_curve = true) needs matplotlib: "
                          "`pip install 'vfm-parallel[train]'`, or set logging.loss_curve = false") from exc


def plot_loss_curve(jsonl: Path, png: Path) -> Path:
    """Loss against step from ``metrics.jsonl`` as a PNG (needs the ``[train]`` extra: matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")  # no display on training nodes
    import matplotlib.pyplot as plt

    steps, losses = read_history(jsonl)
    shown = [v if math.isfinite(v) else float("nan") for v in losses]  # a skipped non-finite step: a gap
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    ax.plot(steps, shown, linewidth=0.8, alpha=0.4, label="per step")
    window = max(1, len(losses) // 20)  # diffusion losses are noisy step to step (random noise levels)
    if window > 1:
        ax.plot(steps, smoothed(losses, window), linewidth=1.6, label=f"mean of {window} steps")
        ax.legend()
    val_steps, val_losses = read_history(jsonl, "val_loss")
    if val_steps:  # the held-out loss at fixed levels and noise: the curve to compare runs by
        ax.plot(val_steps, val_losses, marker="o", markersize=3, linewidth=1.4, label="held-out (val_loss)")
        ax.legend()
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    finite = [v for v in losses + val_losses if math.isfinite(v)]
    ax.set_yscale("log" if finite and min(finite) > 0 else "linear")  # min() of a list holding NaN is arbitrary
    ax.set_title("training loss")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    with fresh_file(png) as tmp:  # written new and renamed: a planted link at png is replaced, not written through
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return png
