"""`vfm train` says what one step holds before the first one runs: a step of large samples on a CPU
takes minutes, and a log printed nothing until step logging.interval (the user's 256x256x17 pixel
shards: 69,632 tokens a sample, 9 minutes a step, a blank screen for 45)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from vfm_cli.main import app

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny.toml"


def test_the_first_line_of_a_run_gives_steps_samples_tokens_per_sample_and_the_logging_interval(tmp_path):
    sets = ["train.steps=2", "optim.warmup_steps=1", "logging.tensorboard=false", "logging.loss_curve=false",
            "logging.interval=5", "data.num_samples=16", "data.micro_batch=4", "optim.grad_accum=2",
            "model.options.hidden=32", "model.options.num_heads=2", "ema.decay=0.5", f"train.out_dir={tmp_path / 'run'}"]
    args = ["train", str(TINY)]
    for item in sets:
        args += ["--set", item]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    # tiny.toml: latent (3, 2, 8, 8), patch (1, 2, 2): 2 x 4 x 4 = 32 tokens
    assert first == ("train: 2 steps of 8 samples (micro_batch 4 x grad_accum 2 x 1 data-parallel rank), 32 tokens "
                     "per sample (latent 3x2x8x8, patch 1x2x2); a line every 5 steps (logging.interval)"), first
