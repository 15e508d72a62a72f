"""``vfm export CHECKPOINT`` of a run whose recorded export settings cannot generate (trained with
``checkpoint.export = false``: 4-channel latents named for the 3-channel ``pixel`` tokenizer): the diffusers
folder, which records no tokenizer, is written; the vfm export is refused naming the options that replace
the recorded settings, and is written with them. Errors name ``--out``, not the hidden folder written first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vfm_cli.main import app

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny.toml"  # synthetic, pixel tokenizer patch 1
#: 4 latent channels for a tokenizer giving 3, which only checkpoint.export = false lets train; one square
#: frame and diffusers' DiT's position and timestep embeddings, so that a diffusers folder can hold it
SETS = {"train.steps": 2, "optim.warmup_steps": 0, "checkpoint.interval": 2, "checkpoint.export": False,
        "logging.tensorboard": False, "logging.loss_curve": False, "logging.progress": False,
        "data.num_samples": 8, "data.micro_batch": 4, "data.latent_shape": [4, 1, 8, 8],
        "model.options.in_channels": 4, "model.options.pos_embed": "sincos2d", "model.options.timestep_freq_shift": 1}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("settings") / "run"
    sets = [arg for key, value in {**SETS, "train.out_dir": str(run)}.items() for arg in ("--set", f"{key}={json.dumps(value)}")]
    result = CliRunner().invoke(app, ["train", str(TINY), *sets])
    assert result.exit_code == 0, result.output
    return run / "checkpoints" / "step_00000002"


def _export(src: Path, out: Path, fmt: str, *options: str):
    return CliRunner().invoke(app, ["export", str(src), "--format", fmt, "-o", str(out), *options])


def test_a_checkpoint_whose_recorded_settings_cannot_generate_still_exports_as_a_diffusers_folder(checkpoint, tmp_path):
    result = _export(checkpoint, tmp_path / "out", "diffusers")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "diffusion_pytorch_model.safetensors").is_file()
    assert json.loads((tmp_path / "out" / "config.json").read_text())["in_channels"] == 4


def test_its_vfm_export_is_refused_naming_out_and_the_options_that_replace_the_recorded_settings(checkpoint, tmp_path):
    out = tmp_path / "out"
    result = _export(checkpoint, out, "vfm")
    assert result.exit_code == 1, result.output
    line = result.stderr.strip()
    assert line.startswith(f"error: refusing to export to {out}: "), line
    assert ".writing-" not in line, line  # the hidden folder written first and renamed to --out
    assert "gives 3 latent channels but the model takes 4" in line
    assert "--tokenizer NAME" in line and "--tokenizer-option KEY=VALUE" in line and "--text-encoder NAME" in line, line
    assert not out.exists()


@pytest.mark.parametrize(("options", "written"), [
    (["--tokenizer-option", "channels=4"], {"patch": 1, "channels": 4}),  # added to the recorded options
    (["--tokenizer", "pixel", "--tokenizer-option", "channels=4"], {"channels": 4}),  # a tokenizer named: its options alone
], ids=["option", "tokenizer"])
def test_tokenizer_options_given_replace_the_recorded_ones_in_the_vfm_export(checkpoint, tmp_path, options, written):
    result = _export(checkpoint, tmp_path / "out", "vfm", *options)
    assert result.exit_code == 0, result.output
    meta = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (meta["tokenizer"], meta["tokenizer_options"]) == ("pixel", written)
    assert meta["source"] == {"step": 2, "ema": True}


def test_generation_settings_are_refused_with_format_diffusers_which_records_none(checkpoint, tmp_path):
    result = _export(checkpoint, tmp_path / "out", "diffusers", "--tokenizer", "pixel")
    assert result.exit_code == 2, result.output
    assert "--tokenizer applies to --format vfm" in result.output


def test_an_export_folder_naming_its_own_files_re_exports_when_the_options_replace_those_settings(tmp_path):
    import vfm_models
    from vfm_models.export import save_export

    src = tmp_path / "src"
    (src / "vae").mkdir(parents=True)
    model = vfm_models.get_family("dit").create("tiny", in_channels=4)
    save_export(src, model, {"family": "dit", "config": model.config, "tokenizer": "sd-vae",
                             "tokenizer_options": {"path": str(src / "vae")}}, for_generation=False)
    meta = json.loads((src / "config.json").read_text())
    meta["tokenizer_options"]["path"] = "vae"  # relative to the export: a copy elsewhere would not find it
    (src / "config.json").write_text(json.dumps(meta))
    result = _export(src, tmp_path / "refused", "vfm")
    assert result.exit_code == 1 and "names files in tokenizer_options" in result.stderr, result.output
    result = _export(src, tmp_path / "out", "vfm", "--tokenizer", "pixel", "--tokenizer-option", "channels=4")
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (written["tokenizer"], written["tokenizer_options"]) == ("pixel", {"channels": 4})
