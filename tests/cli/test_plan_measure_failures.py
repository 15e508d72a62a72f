"""`vfm plan --measure`: a layout that fails is reported with its cause and the table stays readable;
a worker ended by a signal (what the out-of-memory killer does) is named, not torchrun's summary;
and on a packed-batch config the plan names only layouts `vfm train` accepts (the block it writes
included)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vfm_cli.main import app

ROOT = Path(__file__).resolve().parents[2]

# A worker that the kernel kills (SIGKILL, as its out-of-memory killer does) while its peer waits.
KILLED_WORKER = """
import os, signal, time
if os.environ["RANK"] == "1":
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(30)
"""


def test_a_worker_killed_by_a_signal_is_named_with_its_rank_and_signal(tmp_path):
    from vfm_cli.commands.plan import failure_line

    script = tmp_path / "worker.py"
    script.write_text(KILLED_WORKER)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode != 0
    line = failure_line(proc.stdout + proc.stderr)  # torchrun's real output: its summary ends in '======'
    assert line.startswith("rank 1 was killed by SIGKILL (what the out-of-memory killer does"), line


def test_failed_layouts_keep_the_measured_table_aligned_and_give_their_reasons_under_it():
    from vfm_cli.commands.plan import measured_table
    from vfm_parallel.planner import ModelSpec, load_profile, plan
    from vfm_parallel.planner.measure import measure

    result = plan(ModelSpec(name="m", params=10_000_000, layers=4, hidden=256, heads=4, seq_len=256), 4,
                  load_profile("cpu"), global_batch=16)
    chosen = result.distinct()[:3]
    long_error = "exit 1: [rank1]: RuntimeError: Connection closed by peer [127.0.0.1]:29500 (log: /tmp/vfm-plan-measure-x.log)"

    def run(p):
        if p is chosen[1]:
            raise RuntimeError(f"{p.layout.short()}: {long_error}")
        return 1000.0 * (1 + chosen.index(p))

    measured, _ = measure(chosen, run)
    lines = measured_table(measured, {id(p): i for i, p in enumerate(chosen, 1)})
    head, rows, reasons = lines[0], lines[1:4], lines[4:]
    # every row ends with its layout at the column the header puts "layout" at
    column = head.index("layout")
    assert [row[column:] for row in rows] == [chosen[2].layout.short(), chosen[0].layout.short(), chosen[1].layout.short()]
    assert rows[0].split()[:2] == ["1", "3"] and rows[1].split()[:2] == ["2", "1"]
    assert rows[2].split()[:3] == ["-", "2", "failed"]  # no measured place for a layout that did not run
    assert reasons == [f"  failed: {chosen[1].layout.short()}: {long_error}"]


def test_a_packed_config_is_planned_only_with_layouts_vfm_train_accepts(tmp_path):
    # packed batches train with FSDP/HSDP alone (the trainer's config rule): the planner's own model
    # ranked ddp2 first, whose --write-block vfm train refused
    config = tmp_path / "packed.toml"
    config.write_text((ROOT / "configs" / "tiny.toml").read_text().replace(
        'source = "synthetic"', f'source = "shards"\nshards = ["{tmp_path / "shards"}"]\npacking = true\nmax_seq_len = 64'))
    block = tmp_path / "parallel.toml"
    result = CliRunner().invoke(app, ["plan", str(config), "--gpus", "2", "--gpu", "cpu", "--write-block", str(block)])
    assert result.exit_code == 0, result.output
    ranked = [line.split()[1] for line in result.output.splitlines() if line[:1].isdigit()]
    assert ranked and all(name.startswith(("fsdp", "hsdp")) for name in ranked), result.output
    assert "vfm train refuses it with this config: config key 'data.packing'" in result.output
    parallel = tomllib.loads(block.read_text())["parallel"]
    text = config.read_text()
    head, rest = text.split("[parallel]", 1)
    merged = tmp_path / "merged.toml"
    merged.write_text(head + block.read_text() + "\n[" + rest.split("\n[", 1)[1])
    check = CliRunner().invoke(app, ["train", str(merged), "--validate", "--world-size", "2"])
    assert check.exit_code == 0, check.output
    assert parallel["strategies"] == ["fsdp"] and parallel["dp_shard"] == 2


def test_a_measured_order_exactly_the_reverse_of_the_prediction_is_called_the_reverse_not_mostly():
    from vfm_cli.commands.plan import measure_summary
    from vfm_parallel.planner import ModelSpec, load_profile, plan
    from vfm_parallel.planner.measure import measure

    result = plan(ModelSpec(name="m", params=10_000_000, layers=4, hidden=256, heads=4, seq_len=256), 4,
                  load_profile("cpu"), global_batch=16)
    chosen = result.distinct()[:3]
    rank = {id(p): i for i, p in enumerate(chosen, 1)}
    reverse, rho = measure(chosen, lambda p: 1000.0 * rank[id(p)])  # the predicted best measures slowest
    assert rho == pytest.approx(-1.0)
    assert "over 3 layouts: the reverse order (" in measure_summary(reverse, rho, rank, result.hardware)[0]
    partly, rho = measure(chosen, lambda p: {1: 2000.0, 2: 3000.0, 3: 1000.0}[rank[id(p)]])
    assert rho > -0.999  # not exactly reversed: never "the reverse order"
    assert "the reverse order (" not in measure_summary(partly, rho, rank, result.hardware)[0]
