"""``vfm train``: config validation before any process starts, a tiny run with export, and a
2-process torchrun run whose losses equal the single-process run on the same data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vfm_cli.main import app

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"
# A few-step version of configs/tiny.toml.
SMALL = ["train.steps=4", "optim.warmup_steps=1", "checkpoint.interval=2", "logging.tensorboard=false", "logging.progress=false",
         "logging.peak_tflops=1.0", "logging.interval=1", "data.num_samples=32", "model.options.hidden=32", "model.options.num_heads=2"]


def _sets(items):
    return [arg for item in items for arg in ("--set", item)]


DEMO_CONFIG = ROOT / "packages/vfm-cli/src/vfm_cli/demo/train.toml"


@pytest.mark.parametrize("path, world", [(CONFIGS / "tiny.toml", 1), (DEMO_CONFIG, 1), (CONFIGS / "dit-7b.toml", 256),
                                         (CONFIGS / "dit-28b.toml", 256)], ids=lambda v: getattr(v, "name", v))
def test_the_example_configs_validate(path, world):
    result = CliRunner().invoke(app, ["train", str(path), "--validate", "--world-size", str(world)])
    assert result.exit_code == 0, result.output
    assert "valid" in result.output


@pytest.mark.parametrize(
    "override, message",
    [
        ("optim.lr=-1", "config key 'optim.lr': must be > 0"),
        ("model.family=nope", "config key 'model.family': unknown family 'nope'; available: dit"),
        ("model.options.depth=3", "num_layers 3 is not divisible by pp 4"),
        ("parallel.tp=3", "num_heads 40 is not divisible by tp 3"),
    ],
)
def test_a_bad_config_exits_1_naming_the_key_before_anything_starts(override, message):
    result = CliRunner().invoke(app, ["train", str(CONFIGS / "dit-28b.toml"), "--validate", "--world-size", "96", "--set", override])
    assert result.exit_code == 1
    assert message in result.output


def test_vfm_train_runs_the_tiny_config_and_writes_checkpoints_export_and_curve(tmp_path):
    result = CliRunner().invoke(app, ["train", str(CONFIGS / "tiny.toml"), *_sets([*SMALL, f"train.out_dir={tmp_path}"])])
    assert result.exit_code == 0, result.output
    assert "tokens/s" in result.output and "MFU" in result.output
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_00000002", "step_00000004"]
    meta = json.loads((tmp_path / "export" / "config.json").read_text())
    assert meta["family"] == "dit" and meta["tokenizer"] == "pixel" and meta["latent_shape"] == [3, 2, 8, 8]
    import torch
    from safetensors.torch import load_file

    import vfm_models

    weights = load_file(tmp_path / "export" / "model.safetensors")
    family = vfm_models.get_family("dit")
    model = family.build(family.config_cls(**{**meta["config"], "patch": tuple(meta["config"]["patch"])}))
    model.load_state_dict(weights)  # strict: every EMA weight is there, with the right shape
    ema = {k: v for f in (tmp_path / "checkpoints" / "step_00000004" / "tensors").glob("*.safetensors")
           for k, v in load_file(f).items() if k.startswith("ema.")}
    assert all(torch.equal(weights[k[4:]], v) for k, v in ema.items())
    assert (tmp_path / "loss_curve.png").is_file()


def _losses(folder: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (folder / "metrics.jsonl").read_text().splitlines()]


def test_torchrun_two_processes_give_the_single_process_losses(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    common = [str(CONFIGS / "tiny.toml"), *_sets([*SMALL, "checkpoint.export=false", "data.micro_batch=4"])]
    single = subprocess.run([sys.executable, "-m", "vfm_cli.main", "train", *common,
                             *_sets([f"train.out_dir={tmp_path / 'one'}", "optim.grad_accum=2"])],
                            env=env, capture_output=True, text=True, timeout=300)
    assert single.returncode == 0, single.stderr
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "-m", "vfm_cli.main", "train", *common, *_sets([f"train.out_dir={tmp_path / 'two'}"])],
                         env=env, capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    assert _losses(tmp_path / "two") == pytest.approx(_losses(tmp_path / "one"), rel=1e-5)
    assert len(_losses(tmp_path / "one")) == 4
