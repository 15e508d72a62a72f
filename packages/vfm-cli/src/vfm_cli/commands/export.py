"""``vfm export``: a training run's, one of its checkpoints' or an export's weights as a diffusers model folder
or a vfm export."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from vfm_plugins import json_data
from vfm_plugins.folders import written_whole

from vfm_cli.export_folder import out_folder_problem, source_problem
from vfm_cli.failing import fail

FORMATS = ("diffusers", "vfm")


def find_export(path: Path) -> Path:
    """The export folder of ``path``: the folder itself when it is an export, else a run's ``export/``."""
    for folder in (path, path / "export"):
        if (folder / "config.json").is_file() and (folder / "model.safetensors").is_file():
            return folder
    from vfm_cli.checkpoint_export import run_checkpoints_hint

    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    hint = run_checkpoints_hint(path)
    if not hint and ((path / "metrics.jsonl").is_file() or (path / "checkpoints").is_dir()):
        raise FileNotFoundError(f"{path} is a training run with no checkpoint yet and no export/: a run writes a checkpoint "
                                "every checkpoint.interval steps (RUN/checkpoints/step_<N>, which vfm export takes) and "
                                "export/ when it finishes its train.steps")
    external = _diffusers_class(path)
    if external:
        raise FileNotFoundError(f"{path} is a diffusers model folder ({external}), not a vfm export: vfm convert reads it "
                                "(vfm convert FOLDER -o EXPORT), and vfm generate --checkpoint takes it with --tokenizer NAME")
    raise FileNotFoundError(f"{path} is neither a vfm export (config.json + model.safetensors), a training checkpoint "
                            "(RUN/checkpoints/step_<N>) nor a training run with an export in export/ (a run writes it "
                            f"when it finishes its train.steps){hint}")


def _diffusers_class(path: Path) -> str:
    """The ``_class_name`` of a diffusers model folder's (or pipeline's transformer/) config.json, else ''."""
    for config in (path / "config.json", path / "transformer" / "config.json"):
        try:
            name = json_data.loads(config.read_text()).get("_class_name")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(name, str) and name:
            return name
    return ""


def export(
    src: Path = typer.Argument(..., help="A training run folder (train.out_dir, with export/), one of its checkpoints (RUN/checkpoints/step_<N>, from any layout: its EMA weights, else its model weights) or a vfm export folder."),
    fmt: str = typer.Option(..., "--format", help="diffusers (a model folder for <Class>.from_pretrained) or vfm (model.safetensors + config.json)."),
    out: Path = typer.Option(..., "-o", "--out", help="The folder to write."),
    adapter: Optional[str] = typer.Option(None, "--adapter", help="For --format diffusers: the adapter (default: the one that writes the export's family)."),
    tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="For --format vfm: the tokenizer to record instead of the source's (e.g. pixel), with only the options of --tokenizer-option."),
    tokenizer_option: Optional[List[str]] = typer.Option(None, "--tokenizer-option", help="For --format vfm: KEY=VALUE for the tokenizer (repeatable), added to the source's tokenizer options unless --tokenizer names one."),
    text_encoder: Optional[str] = typer.Option(None, "--text-encoder", help="For --format vfm: the text encoder to record instead of the source's, with only the options of --text-encoder-option."),
    text_encoder_option: Optional[List[str]] = typer.Option(None, "--text-encoder-option", help="For --format vfm: KEY=VALUE for the text encoder (repeatable), added to the source's options unless --text-encoder names one."),
) -> None:
    """Export trained weights: as a diffusers model folder (DiT: DiTTransformer2DModel) or as a vfm
    export. The weights are checked against the export's config first (names, shapes, finite values).
    From a checkpoint (a run stopped early, or a step to compare): the checkpoint is checked whole
    against its manifest, its tensors gathered from every rank's files in this process. A checkpoint of a run
    that wrote no export (checkpoint.export = false) may record a tokenizer or text encoder it cannot generate
    with: --tokenizer, --text-encoder and their options replace them (a diffusers folder records neither)."""
    from vfm_cli.commands.convert import parse_assignments
    from vfm_cli.export_settings import COMPONENTS, option_name
    from vfm_cli.paths import folder_problem

    if fmt not in FORMATS:
        raise typer.BadParameter(f"expected one of {', '.join(FORMATS)}, got {fmt!r}", param_hint="--format")
    if adapter is not None and fmt != "diffusers":
        raise typer.BadParameter("--adapter applies to --format diffusers", param_hint="--adapter")
    given = {}
    for component, name, options in zip(COMPONENTS, (tokenizer, text_encoder), (tokenizer_option, text_encoder_option)):
        if name is not None or options:
            option = option_name(component) + ("" if name is not None else "-option")
            if fmt != "vfm":
                raise typer.BadParameter(f"{option} applies to --format vfm (a diffusers model folder records no "
                                         f"{component.replace('_', ' ')})", param_hint=option)
            given[component] = (name, parse_assignments(options, option_name(component) + "-option"))
    problem = folder_problem(out)
    if problem:
        fail(f"--out {problem}")
    problem = out_folder_problem(out)
    if problem:
        fail(problem)

    from vfm_models.adapters.exports import export_to_external
    from vfm_models.export import load_export, read_meta, save_export
    from vfm_models.export_generation import ExportGenerationError
    from vfm_models.export_paths import OPTION_SECTIONS
    from vfm_plugins import UnknownNameError

    from vfm_cli.checkpoint_export import describe, export_checkpoint, looks_like_checkpoint
    from vfm_cli.export_settings import HINT, with_settings, without_settings

    staged: list[Path] = []  # folders written before they become --out, which errors name instead

    def staging(folder: Path) -> Path:
        staged.append(folder)
        return folder

    def settings(meta: dict) -> dict:
        return with_settings(meta, given)

    made = None
    try:
        if looks_like_checkpoint(src):
            if fmt == "vfm":  # the trainer's export, written whole from the checkpoint
                with written_whole(out) as target:
                    made = export_checkpoint(src, staging(target), settings=settings)
            else:
                import tempfile

                with tempfile.TemporaryDirectory(prefix="vfm-export-") as tmp:
                    # weights and model config only: the settings a diffusers folder does not record are not
                    # checked (a run that wrote no export may have recorded ones that cannot generate)
                    made = export_checkpoint(src, staging(Path(tmp) / "export"), settings=without_settings,
                                             for_generation=False)
                    with written_whole(out) as target:
                        export_to_external(made.folder, staging(target), adapter=adapter)
        else:
            folder = find_export(src)
            problem = source_problem(out, folder)
            if problem:
                fail(problem)
            if fmt == "diffusers":
                with written_whole(out) as target:
                    export_to_external(folder, staging(target), adapter=adapter)
            else:  # rebuilt and loaded first: only weights that fit their config are written
                model, checked = load_export(folder)
                meta = read_meta(folder)
                # paths were made absolute; settings the options replace are not written, nor the paths they name
                written, recorded = settings(checked), settings(meta)
                named = [k for k in OPTION_SECTIONS if written.get(k) != recorded.get(k)]
                if named:
                    fail(f"{folder} names files in {', '.join(named)}; copy the whole folder instead of re-exporting it, "
                         "or replace those settings (--tokenizer NAME, --text-encoder NAME and their options)")
                with written_whole(out) as target:  # a weights-only export (vfm convert without --tokenizer) stays one
                    save_export(staging(target), model, recorded, for_generation=False)
    except ExportGenerationError as exc:
        fail(f"{_naming_out(str(exc), staged, out)}; {HINT}")
    except (ValueError, OSError, UnknownNameError) as exc:
        # every refusal of the input (a config.json missing a key, weights that do not fit it, a newer
        # format, a damaged checkpoint: ValueErrors) and a file that cannot be read or written is one
        # line, as the other commands print them; any other exception is a bug and keeps its traceback
        fail(_naming_out(str(exc), staged, out))
    if made is not None:
        typer.echo(f"{fmt}: {out} ({describe(made, src)})")
        return
    typer.echo(f"{fmt}: {out}")


def _naming_out(message: str, staged: list[Path], out: Path) -> str:
    """``message`` naming ``out`` where it names a folder written first to become ``out`` (the hidden sibling
    that ``written_whole`` renames, the temporary export a diffusers folder is made from): the user knows ``out``."""
    for folder in staged:
        message = message.replace(str(folder), str(out))
    return message


def register(app: typer.Typer) -> None:
    app.command("export", no_args_is_help=True)(export)
