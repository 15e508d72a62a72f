"""``vfm plan``: the ranked table, JSON, the winner's [parallel] block that vfm train accepts,
one-line errors for bad input, --calibrate's profile, and --measure under torchrun (slow)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vfm_cli.main import app

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"


def _small_config(tmp_path: Path) -> Path:
    """configs/tiny.toml with a model and clip big enough that compute shows: 4 x 128, 256 tokens."""
    text = (CONFIGS / "tiny.toml").read_text()
    text = text.replace("options = { hidden = 64, depth = 2, num_heads = 4, patch = [1, 2, 2] }",
                        "options = { hidden = 128, depth = 4, num_heads = 4, patch = [1, 2, 2] }")
    text = text.replace("latent_shape = [3, 2, 8, 8]", "latent_shape = [3, 4, 16, 16]").replace("micro_batch = 8", "micro_batch = 4")
    assert "hidden = 128" in text and "[3, 4, 16, 16]" in text
    path = tmp_path / "small.toml"
    path.write_text(text)
    return path


def test_plan_prints_a_ranked_table_and_writes_a_block_vfm_train_accepts(tmp_path):
    block = tmp_path / "parallel.toml"
    result = CliRunner().invoke(app, ["plan", str(CONFIGS / "dit-7b.toml"), "--gpus", "64", "--top", "3", "--write-block", str(block)])
    assert result.exit_code == 0, result.output
    assert "tokens/s/GPU" in result.output and "dit-cross-7B" in result.output
    assert "OOM at" in result.output  # the losers say why
    parallel = tomllib.loads(block.read_text())["parallel"]
    config = (CONFIGS / "dit-7b.toml").read_text().split("[parallel]")
    rest = config[1].split("\n[", 1)[1]
    merged = tmp_path / "merged.toml"
    merged.write_text(config[0] + block.read_text().split("[parallel]", 1)[1].join(["[parallel]", ""]) + "\n[" + rest)
    check = CliRunner().invoke(app, ["train", str(merged), "--validate", "--world-size", "64"])
    assert check.exit_code == 0, check.output
    assert parallel["tp"] * parallel["cp"] * parallel["pp"] * parallel["dp_shard"] * parallel["dp_replicate"] == 64


def test_plan_json_lists_ranked_layouts_with_memory_and_breakdown():
    result = CliRunner().invoke(app, ["plan", str(CONFIGS / "dit-28b.toml"), "--gpus", "32", "--json", "--top", "2"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["model"]["layers"] == 48 and len(data["ranked"]) == 2
    best = data["ranked"][0]
    assert best["memory_gib"]["total"] < 80 and best["tokens_per_s_per_gpu"] > 0 and "compute" in best["breakdown_s"]


def test_seq_len_option_changes_the_plan_to_long_context():
    short = CliRunner().invoke(app, ["plan", str(CONFIGS / "dit-7b.toml"), "--gpus", "64", "--json", "--top", "1"])
    long = CliRunner().invoke(app, ["plan", str(CONFIGS / "dit-7b.toml"), "--gpus", "64", "--json", "--top", "1",
                                    "--seq-len", "73728", "--global-batch", "64"])
    assert short.exit_code == 0 and long.exit_code == 0, long.output
    a, b = json.loads(short.output)["ranked"][0], json.loads(long.output)["ranked"][0]
    assert b["tokens_per_s_per_gpu"] < a["tokens_per_s_per_gpu"] / 2  # attention grows with S


@pytest.mark.parametrize("args, message", [
    (["--gpus", "0"], "--gpus"),
    (["--gpus", "8", "--gpu", "b200x"], "unknown GPU profile 'b200x'"),
    (["--gpus", "8", "--top", "0"], "--top"),
])
def test_bad_options_are_one_line_errors(args, message):
    result = CliRunner().invoke(app, ["plan", str(CONFIGS / "tiny.toml"), *args])
    assert result.exit_code != 0
    assert message in result.output


def test_no_layout_fitting_is_an_error_after_the_reasons():
    # 5 GPUs, 7 samples: dp must be 1, and 4 heads, 32 tokens and 2 layers do not split 5 ways
    result = CliRunner().invoke(app, ["plan", str(CONFIGS / "tiny.toml"), "--gpus", "5", "--global-batch", "7"])
    assert result.exit_code == 1
    assert "num_heads 4 is not divisible by tp 5" in result.output
    assert "error: no layout of 5 x h100 fits dit-tiny at 32 tokens" in result.output


def test_calibrate_writes_a_profile_plan_can_load(tmp_path):
    out = tmp_path / "cpu.toml"
    result = CliRunner().invoke(app, ["plan", "--calibrate", "--gpu", "cpu", "--profile-out", str(out)])
    assert result.exit_code == 0, result.output
    assert "matmul_tflops" in result.output
    data = tomllib.loads(out.read_text())
    assert data["name"] == "cpu-calibrated" and data["peak_bf16_tflops"] > 0
    planned = CliRunner().invoke(app, ["plan", str(_small_config(tmp_path)), "--gpus", "2", "--gpu", str(out), "--top", "2"])
    assert planned.exit_code == 0, planned.output


@pytest.mark.slow
def test_measure_runs_the_top_two_layouts_under_torchrun_and_reports_spearman(tmp_path):
    """Two real 2-process gloo runs of vfm train (about 30-40 s on a shared 2-core machine)."""
    result = CliRunner().invoke(app, ["plan", str(_small_config(tmp_path)), "--gpus", "2", "--gpu", "cpu", "--top", "2",
                                      "--measure", "2", "--measure-steps", "3"])
    assert result.exit_code == 0, result.output
    assert "failed" not in result.output, result.output
    assert "spearman(predicted, measured) = " in result.output


def test_plan_prints_the_train_command_of_the_best_layout_and_vfm_train_accepts_it():
    import shlex

    from vfm_parallel.trainer import config as config_mod

    result = CliRunner().invoke(app, ["plan", str(CONFIGS / "tiny.toml"), "--gpus", "2", "--gpu", "cpu", "--set", "data.micro_batch=4"])
    assert result.exit_code == 0, result.output
    line = [ln for ln in result.output.splitlines() if ln.startswith("train the best: ")]
    assert len(line) == 1, result.output
    words = shlex.split(line[0].removeprefix("train the best: "))
    assert words[:6] == ["torchrun", "--standalone", "--nproc-per-node", "2", "-m", "vfm_cli.main"]
    assert words[6:8] == ["train", str(CONFIGS / "tiny.toml")]
    sets = [words[i + 1] for i, w in enumerate(words) if w == "--set"]
    assert "data.micro_batch=4" in sets  # the plan's own --set comes along
    checked = CliRunner().invoke(app, ["train", *words[7:], "--validate", "--world-size", "2"])
    assert checked.exit_code == 0 and "valid" in checked.output, checked.output
    # the command gives the planned layout: the first row of the table
    cfg = config_mod.load(CONFIGS / "tiny.toml", sets, 2)
    first = [ln for ln in result.output.splitlines() if ln.startswith("1 ")][0].split()[1]
    assert first == "ddp2" and cfg.parallel.resolved(2)["dp_replicate"] == 2 and cfg.parallel.strategies == ["ddp"]


def test_plan_help_names_the_parallel_block():
    result = CliRunner().invoke(app, ["plan", "--help"])
    text = " ".join(result.output.replace("│", " ").split())  # the help box's wrapped lines as one
    assert "Write the winner's [parallel] block to this file." in text


def test_plan_for_more_gpus_than_the_model_has_layers_leaves_out_pipelines_without_blocks():
    # tiny.toml has 2 blocks: pp 4 would give stages no block (it divided by zero)
    result = CliRunner().invoke(app, ["plan", str(CONFIGS / "tiny.toml"), "--gpus", "4", "--gpu", "cpu", "--all-variants", "--top", "1000"])
    assert result.exit_code == 0, result.output
    assert "pp2" in result.output and "pp4" not in result.output
    ranked = [ln for ln in result.output.splitlines() if ln[:1].isdigit()]
    assert any("pp2" in ln for ln in ranked)
    assert not any("pp2" in ln and "ddp" in ln for ln in ranked)  # DDP under a pipeline schedule fails at step 2
    assert any("pp2" in ln and "hsdp2x1" in ln for ln in ranked)  # replicas next to a pipeline: hsdp, which runs them
