"""``vfm train``: an export the run could not generate with (synthetic 4-channel latents named for the
3-channel ``pixel`` tokenizer) is refused when the run starts, naming the problem; ``save_export`` refused
it only once the training had finished, with a traceback and no export."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from vfm_cli.main import app

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny.toml"  # synthetic, pixel tokenizer patch 1
FOUR_CHANNELS = ["--set", "data.latent_shape=[4, 2, 8, 8]", "--set", "model.options.in_channels=4"]


def _train(out_dir: Path, *args: str):
    return CliRunner().invoke(app, ["train", str(TINY), "--set", f"train.out_dir={out_dir}", "--set", "train.steps=2",
                                    "--set", "optim.warmup_steps=0", "--set", "checkpoint.interval=0",
                                    "--set", "logging.tensorboard=false", "--set", "logging.progress=false", *args])


def test_an_export_that_could_not_generate_is_refused_before_the_run_trains(tmp_path):
    result = _train(tmp_path / "run", *FOUR_CHANNELS)
    assert result.exit_code == 1, result.output
    assert "config key 'model': the export this run writes could not generate" in result.output
    assert "the export's tokenizer 'pixel' {'patch': 1} gives 3 latent channels but the model takes 4" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_run_that_writes_no_export_is_not_refused_for_it(tmp_path):
    result = CliRunner().invoke(app, ["train", str(TINY), "--validate", *FOUR_CHANNELS, "--set", "checkpoint.export=false",
                                      "--set", f"train.out_dir={tmp_path / 'run'}"])
    assert result.exit_code == 0, result.output


def test_a_run_whose_tokenizer_gives_the_latent_channels_trains_and_exports(tmp_path):
    result = _train(tmp_path / "run", *FOUR_CHANNELS, "--set", "model.tokenizer_options.channels=4")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "run" / "export" / "config.json").is_file()
