"""Layouts the strategies refuse are refused before any rank starts: ``check_strategies`` (no
process group, the plan of a meta-device model) and ``vfm train --validate`` name the problem and
what is accepted, in one line. They used to surface as tracebacks from ``strategy.apply`` on every
rank after the process group had started (DDP with TP, Ulysses heads against cp, a mesh dimension
no chosen strategy serves)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import vfm_models
from typer.testing import CliRunner

from vfm_parallel import LayoutError, ParallelDims
from vfm_parallel.parallel_model import check_strategies

ROOT = Path(__file__).resolve().parents[2]


def _plan(family: str, **options):
    with torch.device("meta"):
        return vfm_models.get_family(family).create("tiny", **options).parallel_plan()


@pytest.mark.parametrize(
    "dims, strategies, options, message",
    [
        (ParallelDims(tp=2, dp_replicate=2), ["tp", "ddp"], {},
         "ddp does not compose with tp=2 (DTensor parameters); with tp use hsdp (it replicates over dp_replicate=2 as ddp does)"),
        (ParallelDims(cp=2), ["cp-ulysses"], {"num_heads": 3, "hidden": 48},
         "3 heads per TP rank (num_heads 3 / tp 1) are not divisible by cp 2; accepted cp: 3, or use cp-ring"),
        (ParallelDims(tp=2, cp=2), ["tp", "cp-ulysses"], {"num_heads": 2},
         "1 heads per TP rank (num_heads 2 / tp 2) are not divisible by cp 2; accepted cp: none, or use cp-ring"),
        (ParallelDims(tp=2, dp_shard=2), ["fsdp"], {}, "tp=2 but no chosen strategy parallelizes over 'tp'; chosen: fsdp; add one of:"),
        (ParallelDims(cp=2), ["cp-ring", "cp-hybrid"], {}, "strategies 'cp-ring' and 'cp-hybrid' both act in phase 'cp'; pick one"),
        (ParallelDims(tp=2, cp=2), ["sp", "cp-ring"], {}, "sp does not combine with context parallelism (tp 2, cp 2)"),
        (ParallelDims(pp=2, dp_replicate=2), ["pp", "ddp"], {}, "ddp does not run under the pipeline schedule (pp=2: a backward "
         "per microbatch); with pp use hsdp (it replicates over dp_replicate=2 as ddp does)"),
    ],
    ids=["ddp-with-tp", "ulysses-heads", "ulysses-heads-per-tp-rank", "tp-without-strategy", "two-cp-strategies", "sp-with-cp",
         "ddp-with-pp"],
)
def test_a_layout_the_strategies_refuse_is_refused_without_a_process_group(dims, strategies, options, message):
    with pytest.raises(LayoutError) as error:
        check_strategies(dims, strategies, _plan("stdit", **options))
    assert message in str(error.value)


def test_layouts_the_strategies_accept_pass():
    plan = _plan("stdit", num_heads=4, hidden=64)
    for dims, strategies in [(ParallelDims(tp=2, cp=2), ["tp", "cp-ulysses"]), (ParallelDims(cp=2), ["cp-hybrid", "fsdp"]),
                             (ParallelDims(dp_replicate=2), ["ddp"]), (ParallelDims(pp=2, tp=2), ["pp", "tp"])]:
        assert [s.name for s in check_strategies(dims, strategies, plan)] == sorted(strategies, key=lambda n: ["pp", "tp", "cp-ulysses", "cp-hybrid", "ddp", "fsdp"].index(n))


@pytest.mark.parametrize("world", [4, 8])
def test_the_strategies_vfm_picks_for_a_config_that_names_none_run_every_layout(world):
    """dp_replicate 2 with tp 2 (or pp 2) picked ddp, which then refused the layout it was picked for."""
    from itertools import product

    from vfm_parallel.dims import MESH_DIMS, divisors
    from vfm_parallel.trainer.config import ParallelConfig
    from vfm_parallel.trainer.distributed import default_strategies

    plan = _plan("stdit", num_heads=8, hidden=64, depth=8)
    checked = 0
    for sizes in product(divisors(world), repeat=len(MESH_DIMS)):
        dims = ParallelDims(*sizes)
        if dims.world_size != world:
            continue
        chosen = default_strategies(ParallelConfig(), dict(zip(MESH_DIMS, sizes)))
        check_strategies(dims, chosen, plan)  # raises LayoutError naming the refusal
        checked += 1
    assert checked == {4: 15, 8: 35}[world]  # every split of the world over the five dimensions


def test_vfm_train_validate_refuses_ddp_with_tp_in_one_line():
    from vfm_cli.main import app

    result = CliRunner().invoke(app, ["train", str(ROOT / "configs" / "tiny.toml"), "--validate", "--world-size", "2",
                                      "--set", "parallel.tp=2", "--set", "parallel.dp_shard=1",
                                      "--set", 'parallel.strategies=["tp", "ddp"]'])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines == ["error: config key 'parallel.strategies': ddp does not compose with tp=2 (DTensor parameters); "
                     "with tp use fsdp or hsdp"]


@pytest.mark.parametrize("pp, blocks, accepted", [(2, 2, "(1 per stage); accepted: 0 (all) to 1"), (1, 3, "(2 per stage); accepted: 0 (all) to 2")])
def test_vfm_train_validate_refuses_more_checkpointed_blocks_than_a_stage_has(pp, blocks, accepted):
    from vfm_cli.main import app

    result = CliRunner().invoke(app, ["train", str(ROOT / "configs" / "tiny.toml"), "--validate", "--world-size", str(pp),
                                      "--set", f"parallel.pp={pp}", "--set", "parallel.dp_shard=1",
                                      "--set", "parallel.activation_checkpointing=true", "--set", f"parallel.checkpoint_blocks={blocks}"])
    assert result.exit_code == 1
    line = result.output.strip()
    assert line.startswith(f"error: config key 'parallel.checkpoint_blocks': {blocks} blocks to checkpoint per pipeline stage")
    assert line.endswith(accepted)


def test_pp_with_cp_names_what_is_accepted(tmp_path):
    from tests.parallel.trainer_helpers import tiny_config
    from vfm_parallel.trainer import ConfigError, from_dict

    with pytest.raises(ConfigError) as error:
        from_dict(tiny_config(tmp_path, parallel={"pp": 2, "cp": 2, "dp_shard": 1}), 4)
    assert str(error.value).endswith("got cp = 2; accepted: cp = 1 with pp > 1, or pp = 1 with cp > 1")


def test_cp_check_batch_refuses_groups_only_for_the_kinds_a_strategy_deals_whole():
    # ST-DiT grid (2, 4, 6): 2 frames cannot be dealt to cp=4 ranks one sample at a time, 2 samples can
    from vfm_parallel.cp import HYBRID, RING, ULYSSES

    plan = _plan("stdit", num_heads=4, full_attention_blocks=(1,))
    assert HYBRID.grouped_kinds(plan) == ["spatial", "temporal"]
    with pytest.raises(ValueError, match=r"^spatial attention by all-to-all deals whole groups to cp=4 ranks"):
        HYBRID.check_batch(plan, 1, (2, 4, 6), 4)
    HYBRID.check_batch(plan, 2, (2, 4, 6), 4)
    for strategy in (RING, ULYSSES):  # ring and all-to-all by heads take any grid
        assert strategy.grouped_kinds(plan) == []
        strategy.check_batch(plan, 1, (2, 4, 6), 4)
