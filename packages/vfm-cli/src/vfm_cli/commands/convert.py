"""``vfm convert``: a public checkpoint (a local diffusers model folder, a facebookresearch/DiT .pt)
-> a vfm inference export that ``vfm generate`` and ``vfm train`` (``model.init_from``) load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from vfm_cli.failing import fail


def parse_assignments(items: Optional[List[str]], option: str) -> dict:
    """``KEY=VALUE`` pairs; a VALUE that parses as JSON (numbers, true, lists) is taken as such."""
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=option)
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value
    return out


def parse_latent_shape(text: Optional[str]) -> Optional[list]:
    if text is None:
        return None
    parts = text.replace("x", ",").split(",")
    if len(parts) != 4 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise typer.BadParameter(f"expected C,T,H,W of positive integers (e.g. 4,1,32,32), got {text!r}", param_hint="--latent-shape")
    return [int(p) for p in parts]


def convert(
    src: Path = typer.Argument(..., help="A local diffusers model folder (config.json + safetensors; a pipeline folder's transformer/), or a .safetensors / .pt / .pth file."),
    source: str = typer.Option("auto", "--from", help="The adapter (external format), e.g. diffusers-dit, facebookresearch-dit; auto: from config.json's _class_name or the weights."),
    out: Path = typer.Option(..., "-o", "--out", help="The vfm export folder to write (model.safetensors + config.json)."),
    tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="The vfm tokenizer generation decodes with (e.g. pixel); default: none recorded."),
    tokenizer_option: Optional[List[str]] = typer.Option(None, "--tokenizer-option", help="KEY=VALUE for the tokenizer (repeatable)."),
    latent_shape: Optional[str] = typer.Option(None, "--latent-shape", help="C,T,H,W of the training latents; default: the checkpoint's (DiT: sample_size)."),
    set_config: Optional[List[str]] = typer.Option(None, "--set", help="KEY=VALUE of the external config that the weights do not carry (e.g. num_heads=16 for a bare DiT .pt of an unusual width)."),
) -> None:
    """Convert a public checkpoint into a vfm inference export. Only local files are read (nothing
    downloads); weights are read as safetensors, or .pt with torch.load(weights_only=True)."""
    from vfm_cli.paths import folder_problem


    meta = {}
    if tokenizer is not None:
        meta["tokenizer"] = tokenizer
        meta["tokenizer_options"] = parse_assignments(tokenizer_option, "--tokenizer-option")
    elif tokenizer_option:
        raise typer.BadParameter("--tokenizer-option needs --tokenizer", param_hint="--tokenizer-option")
    shape = parse_latent_shape(latent_shape)
    if shape is not None:
        meta["latent_shape"] = shape
    config = parse_assignments(set_config, "--set")
    problem = folder_problem(out)
    if problem:
        fail(f"--out {problem}")
    if (out / "config.json").exists() or (out / "model.safetensors").exists():
        fail(f"--out {out} already holds an export; name a new folder")
    if not src.exists():
        fail(f"{src} does not exist")

    import vfm_models
    from vfm_models.adapters import AdapterConfigError, AdapterKeyError
    from vfm_models.adapters.exports import convert_to_export
    from vfm_models.export import NonFiniteWeightsError
    from vfm_plugins import UnknownNameError

    from vfm_plugins import unknown_options

    try:
        if tokenizer is not None:
            # an unknown name lists the registered ones; a misspelt option was written into the export and
            # failed only at `vfm generate` ("unexpected keyword argument")
            unknown, accepted = unknown_options(vfm_models.get_tokenizer(tokenizer), meta["tokenizer_options"])
            if unknown:
                fail(f"--tokenizer-option: tokenizer {tokenizer!r} has no option {', '.join(unknown)}; "
                     f"options: {', '.join(accepted)}")
        folder = convert_to_export(src, out, adapter=None if source == "auto" else source, config=config, meta=meta)
    except UnknownNameError as exc:
        fail(str(exc))
    except (AdapterConfigError, AdapterKeyError, NonFiniteWeightsError, FileNotFoundError, ValueError) as exc:
        fail(str(exc))
    written = json.loads((folder / "config.json").read_text())
    typer.echo(f"export: {folder} (family {written['family']}, formulation {written.get('formulation', '-')}, "
               f"from {written['converted_from']['adapter']})")
    if not written.get("tokenizer"):
        typer.echo("note: no tokenizer recorded; `vfm generate` needs one: convert with --tokenizer NAME", err=True)


def external_pipeline(folder: Path, tokenizer: Optional[str], **kwargs):
    """A ``VideoPipeline`` over a diffusers model folder converted in memory (``vfm generate --checkpoint``)."""
    from vfm_infer.pipeline import ExportError, VideoPipeline
    from vfm_models.adapters.exports import load_converted
    from vfm_models.export import NonFiniteWeightsError, check_finite

    if tokenizer is None:
        raise ExportError(f"{folder} is a diffusers model folder (converted in memory): name the vfm tokenizer to decode "
                          "with (--tokenizer NAME), or convert it once with `vfm convert` and record one there")
    try:
        model, meta = load_converted(folder, meta={"tokenizer": tokenizer, "tokenizer_options": {}})
        check_finite(model.state_dict(), f"checkpoint {folder}")
    except (NonFiniteWeightsError, FileNotFoundError) as exc:
        raise ExportError(str(exc)) from None
    return VideoPipeline(model, meta, **kwargs)


def register(app: typer.Typer) -> None:
    app.command("convert", no_args_is_help=True)(convert)
