"""vfm plan QA, the command: the printed train command runs as printed (a config's own
checkpoint_blocks no longer outlives the layout), GPU counts the config's mesh does not tile get a
global batch that splits, no-fit errors say why in one line, a tiny model's figures are not 0.0,
the other families get their own FLOPs and activation bytes (checked against a real forward), and
--measure stops torchrun's workers on Ctrl-C."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from vfm_cli.main import app

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs"


def _plan(*args: str):
    return CliRunner().invoke(app, ["plan", *args])


def _train_words(output: str) -> list[str]:
    line = [ln for ln in output.splitlines() if ln.startswith("train the best: ")]
    assert len(line) == 1, output
    words = shlex.split(line[0].removeprefix("train the best: "))
    return words[words.index("train") + 1:]


def test_the_printed_command_resets_a_configs_checkpoint_blocks():
    # the config checkpoints the first block; the winner does not checkpoint: without
    # checkpoint_blocks = 0 in the command vfm train refused it ("1 blocks to checkpoint, but ...")
    result = _plan(str(CONFIGS / "tiny.toml"), "--gpus", "2", "--gpu", "cpu", "--top", "1",
                   "--set", "parallel.activation_checkpointing=true", "--set", "parallel.checkpoint_blocks=1")
    assert result.exit_code == 0, result.output
    words = _train_words(result.output)
    sets = [words[i + 1] for i, w in enumerate(words) if w == "--set"]
    assert "parallel.activation_checkpointing=false" in sets and "parallel.checkpoint_blocks=0" in sets
    assert "parallel.activation_checkpointing=true" not in sets  # the layout's value replaces the user's
    checked = CliRunner().invoke(app, ["train", *words, "--validate", "--world-size", "2"])
    assert checked.exit_code == 0, checked.output


def test_seven_gpus_plan_a_batch_that_splits_when_the_configs_mesh_does_not_tile_them():
    # dit-7b.toml has tp = 2: at 7 GPUs its dp (3) made a global batch of 3, which no layout of 7
    # GPUs splits: "no layout fits". micro_batch x grad_accum x 7 does, and the output says where it is from
    result = _plan(str(CONFIGS / "dit-7b.toml"), "--gpus", "7", "--top", "2")
    assert result.exit_code == 0, result.output
    assert "global batch 7 samples" in result.output
    assert "do not divide 7" in result.output
    checked = CliRunner().invoke(app, ["train", *_train_words(result.output), "--validate", "--world-size", "7"])
    assert checked.exit_code == 0, checked.output


def test_no_layout_fitting_says_how_much_memory_the_smallest_needs():
    result = _plan(str(CONFIGS / "dit-7b.toml"), "--gpus", "1")
    assert result.exit_code == 1
    error = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(error) == 1 and "Traceback" not in result.output
    assert "run out of memory (the smallest needs 132.0 GiB per GPU, h100 has 75.6 usable)" in error[0]
    assert "2 GPUs fit it (vfm plan ... --gpus 2)" in error[0]  # FSDP over 2 with checkpointing
    assert _plan(str(CONFIGS / "dit-7b.toml"), "--gpus", "2", "--top", "1").exit_code == 0


def test_a_gpu_count_that_is_not_whole_nodes_is_one_error_line():
    result = _plan(str(CONFIGS / "dit-7b.toml"), "--gpus", "12")
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "error: 12 GPUs are not whole nodes of 8 GPUs; accepted: at most 8 GPUs (one node) or a multiple of 8, "
        "or give the GPUs per node (--nodes-of, a divisor of 12 such as 3, 4, 6)"]
    ok = _plan(str(CONFIGS / "dit-7b.toml"), "--gpus", "12", "--nodes-of", "4", "--top", "1")
    assert ok.exit_code == 0 and "(4 per node)" in ok.output, ok.output
    assert "torchrun --nnodes 3 --nproc-per-node 4 " in ok.output


def test_a_tiny_models_params_memory_and_tflops_are_not_printed_as_zero():
    result = _plan(str(CONFIGS / "tiny.toml"), "--gpus", "2", "--gpu", "cpu", "--top", "1", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    best = data["ranked"][0]
    assert best["memory_gib"]["total"] > 0 and best["tflops_per_gpu"] > 0 and best["breakdown_s"]["dp_comm"] > 0
    assert data["train_command"].startswith("torchrun --standalone --nproc-per-node 2 ")
    table = _plan(str(CONFIGS / "tiny.toml"), "--gpus", "2", "--gpu", "cpu", "--top", "1")
    assert "dit-tiny: 180.6K params" in table.output
    row = [ln for ln in table.output.splitlines() if ln.startswith("1 ")][0].split()
    assert float(row[-2]) > 0  # GiB column


def test_the_written_block_keeps_the_configs_compile(tmp_path):
    block = tmp_path / "parallel.toml"
    result = _plan(str(CONFIGS / "dit-7b.toml"), "--gpus", "64", "--top", "1", "--write-block", str(block))
    assert result.exit_code == 0, result.output
    assert tomllib.loads(block.read_text())["parallel"]["compile"] is True


# --- families: their own FLOPs and activation bytes, not dit-cross's ---------------------------------

FAMILIES = {  # family: (preset options for a small real model, config overrides)
    "dit-cross": dict(text_dim=16),
    "dit": dict(num_classes=10),
    "stdit": dict(text_dim=16),
    "moviegen": dict(text_dim=16, num_kv_heads=2),
}


def _spec(family: str, tmp_path: Path):
    from vfm_cli.commands.plan import model_spec
    from vfm_parallel.trainer import config as config_mod

    opts = ", ".join(f"{k} = {v}" for k, v in {"hidden": 64, "depth": 2, "num_heads": 4, "patch": [1, 2, 2],
                                                  "in_channels": 4, **FAMILIES[family]}.items())
    text = (CONFIGS / "tiny.toml").read_text()
    text = text.replace('family = "dit"', f'family = "{family}"').replace(
        "options = { hidden = 64, depth = 2, num_heads = 4, patch = [1, 2, 2] }", f"options = {{ {opts} }}")
    text = text.replace("latent_shape = [3, 2, 8, 8]", "latent_shape = [4, 4, 16, 16]")
    if "text_dim" in FAMILIES[family]:  # text-conditional: planned from the shards' shape (none here)
        text = text.replace('tokenizer = "pixel"', 'tokenizer = "pixel"\ntext_encoder = "hash"').replace(
            'source = "synthetic"', 'source = "shards"\nblend = "no-such-blend.yaml"')
    path = tmp_path / f"{family}.toml"
    path.write_text(text)
    cfg = config_mod.load(path, [])
    return cfg, model_spec(cfg)


def _saved_widths(family: str) -> float:
    """Activations a real forward of the family saves for backward, per token per hidden unit per block."""
    import vfm_models

    fam = vfm_models.get_family(family)
    cfg = fam.config_cls(hidden=64, depth=2, num_heads=4, in_channels=4, patch=(1, 2, 2), **FAMILIES[family])
    model = fam.build(cfg)
    T, H, W, S = 4, 16, 16, 4 * 8 * 8
    params = {p.data_ptr() for p in model.parameters()}
    saved: dict = {}

    def pack(t):
        if t.data_ptr() not in params and t.numel() >= S * cfg.hidden // 2:  # per-token tensors, not per-sample ones
            saved[(t.data_ptr(), t.numel())] = t.numel()
        return t

    cond = {"y": torch.tensor([1])} if cfg.num_classes else {"text": torch.randn(1, 8, cfg.text_dim),
                                                             "text_mask": torch.ones(1, 8, dtype=torch.bool)}
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(torch.randn(1, 4, T, H, W), torch.tensor([0.5]), cond)
    return sum(saved.values()) / (cfg.depth * S * cfg.hidden)


def test_each_familys_activation_bytes_follow_what_a_real_forward_saves(tmp_path):
    # every family had dit-cross's 54 bytes per token per hidden unit: stdit (two self-attentions)
    # keeps about 1.4 x as much, dit (no cross-attention, no QK norm or RoPE) about 0.65 x
    counted = {f: _spec(f, tmp_path)[1].act_bytes_per_token for f in FAMILIES}
    measured = {f: _saved_widths(f) for f in FAMILIES}
    for family in ("dit", "stdit", "moviegen"):
        ratio = counted[family] / counted["dit-cross"]
        real = measured[family] / measured["dit-cross"]
        assert abs(ratio / real - 1) < 0.15, (family, counted, measured)


def test_stdit_attention_flops_are_its_spatial_and_temporal_products_not_full_attention(tmp_path):
    import vfm_models
    from vfm_cli import recipe
    from vfm_cli.recipe.resolution import grid_of
    from vfm_models.flops import _attention_flops

    cfg, spec = _spec("stdit", tmp_path)
    r = recipe.resolve(cfg, probe=False)
    with torch.device("meta"):
        model = vfm_models.get_family("stdit").build(r.mcfg)
    grid = grid_of(r.latent_shape, r.mcfg)
    S = grid[0] * grid[1] * grid[2]
    exact = 3 * _attention_flops(model, grid, 0) / S  # training = 3 x forward; text 0: self-attention only
    assert spec.attention_flops_per_token == pytest.approx(exact, rel=1e-9)
    assert spec.model_flops_per_token == pytest.approx(6 * spec.params + exact, rel=1e-9)
    assert spec.model_flops_per_token < 6 * spec.params + 12 * spec.layers * spec.hidden * S  # not full attention
    # vfm's ring and Ulysses cores serve spatial and temporal attention too: CP is not free for stdit
    assert spec.full_layers == 2 * spec.layers
    from vfm_parallel.planner import Layout, load_profile, predict

    ulysses = predict(spec, Layout(cp=2, dp_shard=1, cp_strategy="cp-ulysses", micro_batch=1), load_profile("h100"))
    assert ulysses.time.cp_comm > 0
    _, cross = _spec("dit-cross", tmp_path)  # the convention 6N + 12LhS stays for full attention
    assert cross.model_flops_per_token == 6 * cross.params + 12 * cross.layers * cross.hidden * cross.seq_len


# --- --measure: progress, words for the ranking, and Ctrl-C ------------------------------------------

def _tree(pid: int) -> list[int]:
    from vfm_cli.commands.plan import _descendants

    return [child for child, _ in _descendants(pid)]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads the process tree from /proc")
def test_ctrl_c_during_measure_stops_torchrun_and_its_workers(tmp_path):
    # torchrun starts its workers in sessions of their own: killing torchrun (what subprocess.run did
    # on KeyboardInterrupt) left them training
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, "-m", "vfm_cli.main", "plan", str(CONFIGS / "tiny.toml"), "--gpus", "2",
                             "--gpu", "cpu", "--top", "1", "--measure", "1", "--measure-steps", "50"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(seen) < 3:  # torchrun + 2 workers
            seen.update(_tree(proc.pid))
            time.sleep(0.2)
        assert len(seen) >= 3, "torchrun and its workers never started"
        proc.send_signal(signal.SIGINT)  # Ctrl-C reaches vfm plan
        out, _ = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
    for _ in range(50):
        if not any(_alive(pid) for pid in seen):
            break
        time.sleep(0.1)
    left = [pid for pid in seen if _alive(pid)]
    for pid in left:  # clean up what the code under test left behind, then fail
        os.kill(pid, signal.SIGKILL)
    assert not left, out
    assert proc.returncode == 1, out
    assert "[1/1] fsdp2 mb8 ..." in out or "[1/1] ddp2 mb8 ..." in out, out  # progress before the run ends
    assert "error: interrupted" in out and "Traceback" not in out, out


def test_the_measured_ranking_is_explained_in_words():
    from vfm_cli.commands.plan import measure_summary
    from vfm_parallel.planner import ModelSpec, load_profile, plan
    from vfm_parallel.planner.measure import measure

    cpu = load_profile("cpu")
    result = plan(ModelSpec(name="m", params=10_000_000, layers=4, hidden=256, heads=4, seq_len=256), 4, cpu, global_batch=16)
    chosen = result.distinct()[:3]
    # measured in the reverse of the predicted order
    measured, rho = measure(chosen, lambda p: 1000.0 + 100 * chosen.index(p))
    lines = measure_summary(measured, rho, {id(p): i for i, p in enumerate(chosen, 1)}, cpu)
    assert lines[0].startswith("spearman(predicted, measured) = -1.000 over 3 layouts: the reverse order")
    assert lines[1] == (f"the predicted best, {chosen[0].layout.short()}, measured 3 of 3; "
                        f"the fastest measured was {chosen[2].layout.short()}")
    assert lines[2].startswith("the measured rates are within 17% of each other")  # 1,000 to 1,200
    assert "vfm plan --calibrate" in lines[3]  # the built-in cpu profile is not measured


def test_json_lists_every_variant_with_all_variants():
    result = _plan(str(CONFIGS / "tiny.toml"), "--gpus", "2", "--gpu", "cpu", "--json", "--all-variants", "--top", "3")
    assert result.exit_code == 0, result.output
    shapes = [(r["parallel"]["tp"], r["parallel"]["cp"], r["parallel"]["pp"]) for r in json.loads(result.output)["ranked"]]
    assert len(shapes) == 3 and len(set(shapes)) < 3  # variants of one (tp, cp, pp) shape, as the table lists them


def test_measure_steps_below_two_is_refused_before_anything_runs():
    start = time.monotonic()
    result = _plan(str(CONFIGS / "tiny.toml"), "--gpus", "2", "--gpu", "cpu", "--measure", "1", "--measure-steps", "1")
    assert result.exit_code == 2 and "--measure-steps" in result.output and "must be >= 2" in result.output
    assert time.monotonic() - start < 10  # no torchrun was started


def test_a_failed_measured_run_names_the_workers_error_not_torchruns():
    from vfm_cli.commands.plan import failure_line, measure_summary
    from vfm_parallel.planner import ModelSpec, load_profile, plan
    from vfm_parallel.planner.measure import measure

    # the tail torchrun prints when a worker raised (as a real 4-process run printed it): the line
    # with "Error:" that --measure reported was torchrun's ChildFailedError, which says nothing
    tail = ("[rank1]: Traceback (most recent call last):\n"
            '[rank1]:   File "trainer.py", line 80, in step\n'
            "[rank1]: RuntimeError: Connection closed by peer [127.0.0.1]:29500\n"
            "E1124 02:14:03.044000 5861 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 1\n"
            "Traceback (most recent call last):\n"
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
            "============================================================\n")
    assert failure_line(tail) == "[rank1]: RuntimeError: Connection closed by peer [127.0.0.1]:29500"
    assert failure_line(tail + "error: config key 'data.micro_batch': bad\n") == "error: config key 'data.micro_batch': bad"

    cpu = load_profile("cpu")
    result = plan(ModelSpec(name="m", params=10_000_000, layers=4, hidden=256, heads=4, seq_len=256), 4, cpu, global_batch=16)
    chosen = result.distinct()[:3]

    def run(p):
        if p is chosen[0]:
            raise RuntimeError(f"{p.layout.short()}: exit 1: {failure_line(tail)}")
        return 1000.0 * (1 + chosen.index(p))

    measured, rho = measure(chosen, run)
    lines = measure_summary(measured, rho, {id(p): i for i, p in enumerate(chosen, 1)}, cpu)
    assert f"the predicted best, {chosen[0].layout.short()}, failed to run" in lines[1]


@pytest.mark.parametrize("where, message", [
    ("missing-folder/parallel.toml", "does not exist; create it or give a file in an existing folder"),
    (".", "is a folder; give a file name"),
])
def test_an_output_path_that_cannot_be_written_is_refused_before_planning(tmp_path, where, message):
    # it was a FileNotFoundError / IsADirectoryError traceback after the plan was printed
    path = tmp_path / where
    for option, args in (("--write-block", [str(CONFIGS / "tiny.toml"), "--gpus", "2", "--gpu", "cpu"]),
                         ("--profile-out", ["--calibrate", "--gpu", "cpu"])):
        result = _plan(*args, option, str(path))
        assert result.exit_code == 2, result.output
        text = " ".join(result.output.replace("│", " ").split())
        assert option in text and message in text and "Traceback" not in text
        assert "tokens/s/GPU" not in result.output  # refused before planning


def test_the_fewest_gpus_that_fit_are_suggested_with_the_gpu_and_node_size_they_were_found_for():
    # on h200 dit-28b fits 4 GPUs; "vfm plan ... --gpus 4" alone plans h100s, on which it does not fit
    result = _plan(str(CONFIGS / "dit-28b.toml"), "--gpus", "1", "--gpu", "h200", "--nodes-of", "4")
    assert result.exit_code == 1
    error = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert "4 GPUs fit it (vfm plan ... --gpus 4 --gpu h200 --nodes-of 4)" in error[0], error
    again = _plan(str(CONFIGS / "dit-28b.toml"), "--gpus", "4", "--gpu", "h200", "--nodes-of", "4", "--top", "1")
    assert again.exit_code == 0, again.output
    assert "(vfm plan ... --gpus 2)" in " ".join(_plan(str(CONFIGS / "dit-7b.toml"), "--gpus", "1").output.split())
