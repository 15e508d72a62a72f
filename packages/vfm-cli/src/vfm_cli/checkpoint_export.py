"""A training checkpoint (``RUN/checkpoints/step_<N>``, saved under any layout) as an inference export,
the same files as the trainer's own (or that export's model in memory, :func:`read_checkpoint`): the full
tensors are gathered in this one process (DCP reads every rank's chunks; no process group is needed, and
under one every rank reads them whole), the EMA weights when the run had EMA, else the model's.

A checkpoint is data: it is checked whole first (every file against its manifest, its step, every
tensor's chunks tiling it: :func:`vfm_parallel.checkpoint.verify`, as resuming does), nothing is
unpickled, no file outside its folder is opened, and the model its ``state.json`` describes is built on
the meta device and compared with the saved shapes before any memory is allocated for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

#: what a committed checkpoint folder holds (vfm_parallel.checkpoint)
_MARKS = ("manifest.json", "state.json", "tensors")


@dataclass(frozen=True)
class CheckpointExport:
    """What :func:`export_checkpoint` wrote: the export folder, the checkpoint's step, and whether the
    weights are the EMA ones (else the model's own: the run had no EMA)."""

    folder: Path
    step: int
    ema: bool

    @property
    def weights(self) -> str:
        return _which_weights(self.ema)


def _which_weights(ema: bool) -> str:
    return "EMA weights" if ema else "model weights (the run had no EMA)"


def looks_like_checkpoint(path: Path) -> bool:
    """``path`` is a training checkpoint folder (or what is left of one), not an export or a run folder:
    a ``step_<N>`` folder, or one holding a checkpoint's manifest, state or tensors and no export."""
    from vfm_parallel.checkpoint_names import folder_step

    if not path.is_dir() or (path / "model.safetensors").is_file():
        return False
    return folder_step(path) is not None or any((path / name).exists() for name in _MARKS)


def run_checkpoints_hint(path: Path) -> str:
    """For a training run folder (or its ``checkpoints/``): '; its newest checkpoint is ...', else ''."""
    from vfm_parallel.checkpoint_folders import latest

    for root in (path / "checkpoints", path):
        try:
            newest = latest(root)
        except OSError:
            newest = None
        if newest is not None:
            return f"; its newest checkpoint is {newest} (give that folder to use it)"
    return ""


class CheckpointExportError(ValueError):
    """An intact checkpoint that cannot be exported (no export settings recorded, a model that does not
    build from them); one line naming the checkpoint."""


@dataclass(frozen=True)
class CheckpointWeights:
    """What :func:`read_checkpoint` read: the model with the exported weights (EMA when the run had
    EMA), the export settings (``config.json`` of an export, ``source`` included), the step, which weights."""

    model: Any
    meta: dict
    step: int
    ema: bool

    @property
    def weights(self) -> str:
        return _which_weights(self.ema)


def read_checkpoint(checkpoint: str | Path) -> CheckpointWeights:
    """The model a training checkpoint exports, built and filled in memory: what :func:`export_checkpoint`
    writes, without writing it. Under a process group every rank must call it: the files are verified
    once between them (each rank hashes its share) and each rank reads the whole weights.  Raises
    ``vfm_parallel.checkpoint.CheckpointError`` (damaged, not committed, tensors not fitting) or
    :class:`CheckpointExportError`, one line each."""
    import vfm_models
    from vfm_models.checkpoint import CheckpointMismatchError
    from vfm_models.export import check_build_fits, check_finite, _tuples
    from vfm_parallel import checkpoint as ckpt

    checkpoint = Path(checkpoint)
    state = ckpt.verify(checkpoint)  # whole or refused, before anything in it is believed
    step = state["step"]
    meta = recorded_meta(checkpoint, state)
    part, shapes = exported_part(checkpoint)
    ema = part == "ema"
    family = vfm_models.get_family(meta["family"])  # an unknown name lists the registered ones
    try:
        config = family.config(**_tuples(meta["config"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointExportError(f"checkpoint {checkpoint}: the model config in its state.json 'export' does not "
                                    f"build family {meta['family']!r} ({type(exc).__name__}: {exc})") from None
    try:  # on the meta device: a config that does not fit the tensors allocates nothing
        check_build_fits(lambda: family.build(config), shapes,
                         f"checkpoint {checkpoint}: its {part} tensors do not fit the model in its state.json")
    except CheckpointMismatchError as exc:
        raise ckpt.IncompatibleCheckpointError(" ".join(str(exc).split())) from None
    model = family.build(config)
    # what the trainer exports, read straight into the model: the EMA weights (else the model's), not
    # the other part nor an EMA copy beside it
    ckpt.load_weights(checkpoint, model, part)  # names, shapes, dtypes checked
    result = CheckpointWeights(model, {**meta, "source": {"step": step, "ema": ema}}, step, ema)
    check_finite(model.state_dict(), f"checkpoint {checkpoint} ({result.weights})")
    return result


def exported_part(checkpoint: Path) -> tuple[str, dict[str, tuple[int, ...]]]:
    """(part, shapes): the part of a training checkpoint its export takes, ``"ema"`` when the run had EMA
    else ``"model"``, and that part's tensor shapes by model key, from the tensor headers (no weight read)."""
    from vfm_parallel.checkpoint_integrity import saved_tensors

    saved = saved_tensors(checkpoint)
    part = "ema" if any(name.startswith("ema.") for name in saved) else "model"
    prefix = part + "."
    return part, {name[len(prefix):]: shape for name, (shape, _, _) in saved.items() if name.startswith(prefix)}


def export_checkpoint(checkpoint: str | Path, out: str | Path, *, settings: Callable[[dict], dict] | None = None,
                      for_generation: bool = True) -> CheckpointExport:
    """Write the inference export of ``checkpoint`` to ``out`` (``model.safetensors`` + ``config.json``,
    its ``source`` saying the step and which weights). ``settings``: the export settings written, from the
    recorded ones (default: those); ``for_generation`` as ``save_export`` takes it. Raises as
    :func:`read_checkpoint` does, and as ``save_export`` does for settings that cannot generate."""
    from vfm_models.export import save_export

    read = read_checkpoint(checkpoint)
    save_export(Path(out), read.model, settings(read.meta) if settings else read.meta, for_generation=for_generation)
    return CheckpointExport(Path(out), read.step, read.ema)


def export_origin(checkpoint: str | Path) -> Path:
    """The folder the paths in a checkpoint's export settings are relative to, as they are in the export
    the run writes: ``RUN/export`` for ``RUN/checkpoints/step_<N>`` (a relative tokenizer path there names
    the same file from every checkpoint of the run), the checkpoint folder itself when it lies elsewhere."""
    checkpoint = Path(checkpoint).absolute()
    if checkpoint.parent.name == "checkpoints":
        return checkpoint.parent.parent / "export"
    return checkpoint


def recorded_meta(checkpoint: Path, state: dict) -> dict:
    """The export settings ``state.json`` records, checked as an export's ``config.json`` is, before any
    weight is read (state.json is parsed as Python parses JSON, which takes NaN and Infinity: an export
    written with them would be refused only when loaded)."""
    from vfm_models.export import _check_meta
    from vfm_parallel.checkpoint import DamagedCheckpointError

    meta = state.get("export")
    if meta is None:
        raise CheckpointExportError(
            f"checkpoint {checkpoint} records no export settings (its state.json has no 'export': it was saved by an "
            "earlier vfm); resume the run with this version (vfm train CONFIG) to save a checkpoint that has them")
    damaged = f"checkpoint {checkpoint} is damaged: state.json 'export'"
    if not (isinstance(meta, dict) and isinstance(meta.get("family"), str) and isinstance(meta.get("config"), dict)):
        raise DamagedCheckpointError(f"{damaged} is not an object with family (a name) and config (an object)")
    bad = _non_finite(meta)
    if bad is not None:
        raise DamagedCheckpointError(f"{damaged}: {bad[0]} is {bad[1]!r}, not a finite number; accepted: finite numbers")
    try:
        _check_meta(meta, damaged)
    except ValueError as exc:
        raise DamagedCheckpointError(str(exc)) from None
    return meta


def _non_finite(value: Any, key: str = "") -> tuple[str, float] | None:
    """(dotted key, value) of the first float in ``value`` that is inf or nan, else None."""
    if isinstance(value, float) and not math.isfinite(value):
        return key, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for name, item in items:
        found = _non_finite(item, f"{key}.{name}" if key else str(name))
        if found is not None:
            return found
    return None


def describe(result: CheckpointExport, checkpoint: Path) -> str:
    """One line for the user: which step and which weights the export holds."""
    return f"step {result.step} of {checkpoint}: {result.weights}"

