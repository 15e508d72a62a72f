"""`vfm train` on two torchrun nodes (two launchers on this machine in one c10d rendezvous)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.two_nodes import run_two_nodes
from tests.parallel.test_orphan_ranks import SETS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_run_folder_the_nodes_do_not_share_is_refused_before_the_first_step(tmp_path):
    # node-local scratch: each node's train.out_dir is a folder the other node's ranks never see
    sets = [a for item in [*SETS, "train.steps=3", "checkpoint.interval=1"] for a in ("--set", item)]
    ends = run_two_nodes(["train", str(ROOT / "configs" / "tiny.toml"), *sets],
                         ([f"--set", f"train.out_dir={tmp_path / 'node0'}"], ["--set", f"train.out_dir={tmp_path / 'node1'}"]))
    outputs = "\n".join(output for _, output in ends)
    assert [code for code, _ in ends] == [1, 1], outputs
    errors = [line for line in outputs.splitlines() if line.startswith("error:")]
    assert errors and all("is not one folder shared by every rank" in line for line in errors), outputs
    assert not list(tmp_path.glob("node*/checkpoints/step_*")), "a step ran before the refusal"
    assert not list(tmp_path.glob("node*/.vfm-shared-*")), "the probe file was left behind"


@pytest.mark.slow
def test_a_run_folder_both_nodes_share_trains_and_resumes(tmp_path):
    out = tmp_path / "run"
    sets = [a for item in [*SETS, "train.steps=2", "checkpoint.interval=1", f"train.out_dir={out}"] for a in ("--set", item)]
    args = ["train", str(ROOT / "configs" / "tiny.toml"), *sets]
    first = run_two_nodes(args)
    assert [code for code, _ in first] == [0, 0], "\n".join(o for _, o in first)
    again = run_two_nodes([*args, "--set", "train.steps=3"])
    assert [code for code, _ in again] == [0, 0], "\n".join(o for _, o in again)
    assert sorted(p.name for p in (out / "checkpoints").glob("step_*")) == ["step_00000002", "step_00000003"]
    assert not list(out.glob(".vfm-shared-*"))
