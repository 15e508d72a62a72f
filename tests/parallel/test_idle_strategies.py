"""A strategy listed for a mesh dimension of size 1 parallelizes nothing (``tp`` with tp = 1,
``cp-ring`` with cp = 1, ``fsdp`` with dp_shard = cp = 1): ``idle_strategies`` names it, and
``vfm train`` / ``vfm train --validate`` print it as one ``warning:`` line (rank 0 only under
torchrun), not an error: a config shared between a 1-GPU and an N-GPU run is still valid.
``megatron-sp`` with tp > 1 where CUDA is unusable is refused by a run before any process group
starts, and is a ``note:`` line under ``--validate`` (which checks a config for the machines it is
meant for, e.g. on a login node without CUDA)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import vfm_models
from typer.testing import CliRunner

from vfm_parallel import HardwareError, LayoutError, ParallelDims
from vfm_parallel.parallel_model import check_strategies, idle_strategies

ROOT = Path(__file__).resolve().parents[2]
TINY = str(ROOT / "configs" / "tiny.toml")


@pytest.mark.parametrize(
    "dims, strategies, lines",
    [
        (ParallelDims(), ["tp"], ["parallel.tp = 1, so strategy 'tp' parallelizes nothing; set parallel.tp > 1 or drop "
                                  "'tp' from parallel.strategies"]),
        (ParallelDims(dp_shard=2), ["cp-ring", "fsdp"],
         ["parallel.cp = 1, so strategy 'cp-ring' parallelizes nothing; set parallel.cp > 1 or drop 'cp-ring' from "
          "parallel.strategies"]),
        (ParallelDims(), ["fsdp", "ac"],
         ["parallel.dp_shard = 1 and parallel.cp = 1, so strategy 'fsdp' parallelizes nothing; set parallel.dp_shard > 1 "
          "or drop 'fsdp' from parallel.strategies"]),
        (ParallelDims(tp=2), ["sp", "megatron-tp"], []),  # (two tp-phase strategies: check_strategies' error, not this)
        (ParallelDims(cp=2), ["fsdp"], []),  # fsdp shards over dp_shard x cp
        (ParallelDims(tp=2, dp_shard=2), ["tp", "fsdp", "compile"], []),
    ],
    ids=["tp", "cp-ring", "fsdp", "busy-tp", "fsdp-over-cp", "all-busy"],
)
def test_idle_strategies_names_the_strategy_the_dimension_and_its_size(dims, strategies, lines):
    assert idle_strategies(dims, strategies) == lines


def _validate(*sets: str, world: int = 1):
    from vfm_cli.main import app

    args = ["train", TINY, "--validate", "--world-size", str(world)]
    for item in sets:
        args += ["--set", item]
    return CliRunner().invoke(app, args)


def test_vfm_train_validate_warns_once_about_a_strategy_on_a_dimension_of_size_1(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    result = _validate('parallel.strategies=["tp", "fsdp"]', "parallel.dp_shard=2", world=2)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "warning: parallel.tp = 1, so strategy 'tp' parallelizes nothing; set parallel.tp > 1 or drop 'tp' from "
        "parallel.strategies",
        f"{TINY}: valid"]


def test_the_warning_is_printed_by_rank_0_only(monkeypatch):
    """Under torchrun every rank validates the same config: rank 0 prints the warning, once per job."""
    monkeypatch.setenv("RANK", "1")
    result = _validate('parallel.strategies=["cp-ring", "fsdp"]', "parallel.dp_shard=2", world=2)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [f"{TINY}: valid"]


def test_strategies_chosen_from_the_dims_never_warn(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    result = _validate()  # tiny.toml: strategies = [], dp_shard = -1, one process: nothing chosen, nothing idle
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [f"{TINY}: valid"]


needs_no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is usable here: megatron-sp can run")


@needs_no_cuda
def test_megatron_sp_without_cuda_is_refused_before_any_process_group():
    with torch.device("meta"):
        plan = vfm_models.get_family("dit").create("tiny").parallel_plan()
    with pytest.raises(HardwareError) as error:  # a LayoutError: parallelize and a run refuse it like any other
        check_strategies(ParallelDims(tp=2), ["megatron-sp"], plan)
    message = str(error.value)
    assert isinstance(error.value, LayoutError) and "\n" not in message
    assert message.startswith("megatron-sp: megatron-core's sequence-parallel layers need CUDA")
    assert message.endswith("without CUDA use vfm's 'sp' (or 'tp'), or 'megatron-tp'")


@needs_no_cuda
def test_a_check_for_other_machines_collects_the_hardware_refusal_and_still_refuses_the_rest():
    with torch.device("meta"):
        plan = vfm_models.get_family("dit").create("tiny").parallel_plan()
    hardware: list = []
    assert [s.name for s in check_strategies(ParallelDims(tp=2), ["megatron-sp"], plan, hardware=hardware)] == ["megatron-sp"]
    assert [exc.note() for exc in hardware] == [
        "megatron-sp needs CUDA, which this machine lacks; the config is valid for a CUDA machine"]
    with pytest.raises(LayoutError) as error:  # a layout no machine can run is still refused
        check_strategies(ParallelDims(tp=2, dp_replicate=2), ["megatron-sp", "ddp"], plan, hardware=[])
    assert not isinstance(error.value, HardwareError)


MEGATRON_SP_TP2 = ("parallel.tp=2", "parallel.dp_shard=1", 'parallel.strategies=["megatron-sp"]')


@needs_no_cuda
def test_vfm_train_validate_notes_that_megatron_sp_needs_cuda_and_passes_the_config(monkeypatch):
    """A researcher checks a cluster config on a laptop or login node without CUDA."""
    monkeypatch.delenv("RANK", raising=False)
    result = _validate(*MEGATRON_SP_TP2, world=2)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "note: megatron-sp needs CUDA, which this machine lacks; the config is valid for a CUDA machine",
        f"{TINY}: valid"]


def test_vfm_train_validate_still_refuses_what_no_machine_runs(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    result = _validate("parallel.tp=2", "parallel.dp_replicate=2", "parallel.dp_shard=1",
                       'parallel.strategies=["megatron-sp", "ddp"]', world=4)
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: config key 'parallel.strategies': ")
    assert "note:" not in result.output


@needs_no_cuda
def test_vfm_train_refuses_megatron_sp_without_cuda_in_one_line_before_any_process_group(monkeypatch, tmp_path):
    """A real run (no --validate) on this machine: WORLD_SIZE as torchrun sets it, refused by the
    config check before any process group starts (no torchrun needed to see it)."""
    from vfm_cli.main import app

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    args = ["train", TINY, "--set", f"train.out_dir={tmp_path / 'run'}"]
    for item in MEGATRON_SP_TP2:
        args += ["--set", item]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: config key 'parallel.strategies': megatron-sp: megatron-core's sequence-parallel layers need CUDA")
    assert not (tmp_path / "run").exists()


def test_fsdp_on_one_process_says_how_dp_shard_minus_1_became_1(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    result = _validate('parallel.strategies=["fsdp"]')  # tiny.toml: dp_shard = -1
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (
        "warning: parallel.dp_shard = 1 (-1 with world size 1) and parallel.cp = 1, so strategy 'fsdp' parallelizes "
        "nothing; set parallel.dp_shard > 1 or drop 'fsdp' from parallel.strategies")


def _torchrun_lines(tmp_path, *sets: str) -> tuple[int, list[str]]:
    import subprocess

    from tests.cli.test_train_torchrun_errors import _torchrun

    proc = _torchrun(tmp_path / "run", *sets, "train.steps=2", stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output, _ = proc.communicate(timeout=120)
    return proc.returncode, [line for line in output.splitlines() if line.startswith(("error:", "warning:", "[rank"))]


@pytest.mark.slow
def test_under_torchrun_the_warning_is_one_line_and_the_run_goes_on(tmp_path):
    code, lines = _torchrun_lines(tmp_path, 'parallel.strategies=["cp-ring", "fsdp"]')
    assert code == 0
    assert lines == ["warning: parallel.cp = 1, so strategy 'cp-ring' parallelizes nothing; set parallel.cp > 1 or "
                     "drop 'cp-ring' from parallel.strategies"]


@needs_no_cuda
@pytest.mark.slow
def test_vfm_train_under_torchrun_refuses_megatron_sp_without_cuda_with_one_line_and_exit_1(tmp_path):
    code, lines = _torchrun_lines(tmp_path, "parallel.tp=2", "parallel.dp_shard=1", 'parallel.strategies=["megatron-sp"]')
    assert code == 1
    assert len(lines) == 1 and lines[0].startswith(
        "error: config key 'parallel.strategies': megatron-sp: megatron-core's sequence-parallel layers need CUDA")
