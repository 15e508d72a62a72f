"""``vfm train`` on shards with model-parallel subset loading (seed 000: "each model parallel rank
downloads a different subset of data ... and then all-gathers"): the tp ranks of one data-parallel
rank read its steps in turn and share them, so each reads about half of the bytes, and the run
trains on the same samples in the same order as one process, which also continues its checkpoint.
"""

from __future__ import annotations

import json
import os
import warnings

import pytest
import torch

from tests.cli.test_train_shards import shard_config, shards  # noqa: F401 - the module's shard fixture
from tests.gloo import spawn
from vfm_cli import recipe
from vfm_parallel.trainer import from_dict, train
from vfm_parallel.trainer.saving import full_weights

STEPS = 4
TP = {"tp": 2, "dp_shard": 1}


def _run(cfg: dict, world: int = 1):
    """The run's losses and final weights, and the bytes this rank's loader read."""
    torch.set_num_threads(1)
    built = []

    def build(ctx):
        built.append(recipe.parts_builder(recipe.validate(parsed))(ctx))
        return built[-1]

    parsed = from_dict(cfg, world)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*pin_memory.*")
        result = train(parsed, build)
    weights = {k: v.numpy() for k, v in full_weights(result.model.named_parameters()).items()}
    return result.losses, weights, built[-1].loader.loader.bytes_read


def _config(out, blend, **data):
    return shard_config(out, blend, train={"steps": STEPS}, data=data)


def _tp2(rank, world, root, out, data, stop_at):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    cfg = _config(out, root / "blend.yaml", **data)
    cfg["parallel"] = dict(TP)
    cfg["train"]["stop_at"] = stop_at
    return _run(cfg, world)


def _assert_same_run(run, reference):
    (losses, weights, _), (ref_losses, ref_weights, _) = run, reference
    assert losses.keys() == ref_losses.keys()
    for step in ref_losses:  # TP sums its matmul halves in another order: equal to rounding
        assert losses[step] == pytest.approx(ref_losses[step], rel=1e-5, abs=1e-6), f"step {step}"
    for name, tensor in ref_weights.items():
        torch.testing.assert_close(torch.from_numpy(weights[name]), torch.from_numpy(tensor), rtol=1e-4, atol=1e-5, msg=name)


def test_tp_ranks_each_read_half_the_steps_and_train_on_one_process_sequence(shards, tmp_path):  # noqa: F811
    # (packed batches train under data parallelism only: no model-parallel peers to share with)
    root, _ = shards
    ranks = spawn(_tp2, 2, root, tmp_path / "tp", {}, 0)
    single = _run(_config(tmp_path / "one", root / "blend.yaml"))
    for run in ranks:
        _assert_same_run(run, single)
    read = [bytes_read for _, _, bytes_read in ranks]
    assert sum(read) == single[2]  # every byte of the run read once, by one of the two ranks
    assert all(0 < r < single[2] for r in read)  # each rank read a part: its turns


def test_without_subset_loading_each_tp_rank_reads_every_step(shards, tmp_path):  # noqa: F811
    root, _ = shards
    ranks = spawn(_tp2, 2, root, tmp_path / "tp", {"subset_loading": False}, 0)
    single = _run(_config(tmp_path / "one", root / "blend.yaml"))
    assert [bytes_read for _, _, bytes_read in ranks] == [single[2], single[2]]
    _assert_same_run(ranks[0], single)


def test_a_tp2_checkpoint_of_shared_reads_continues_in_one_process_as_the_straight_run(shards, tmp_path):  # noqa: F811
    root, _ = shards
    spawn(_tp2, 2, root, tmp_path / "run", {}, 2)  # stops and checkpoints after step 2
    state = json.loads((tmp_path / "run" / "checkpoints" / "step_00000002" / "ranks" / "rank_00000.json").read_text())
    assert (state["loader"]["group_size"], state["loader"]["share"]) == (2, "turns")
    assert len(state["loader"]["stream_states"]) >= 2  # both ranks' streams, gathered at the save
    resumed = _run(_config(tmp_path / "run", root / "blend.yaml"))  # same folder, one process: resume = auto
    straight = _run(_config(tmp_path / "straight", root / "blend.yaml"))
    assert set(resumed[0]) == set(range(3, STEPS + 1))
    for step in resumed[0]:
        assert resumed[0][step] == pytest.approx(straight[0][step], rel=1e-4, abs=1e-6), f"step {step}"


def _skips(rank, world, folder, out, parallel):
    """The data metrics of the run's last logged step (rank 0's row; every rank takes part in them)."""
    if world > 1:  # a spawned rank (the test's own process keeps its environment)
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    cfg = shard_config(out, "", data={"blend": "", "shards": [str(folder)]}, train={"steps": STEPS})
    cfg["parallel"] = dict(parallel)
    parsed = from_dict(cfg, world)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the skip warnings
        torch.set_num_threads(1)
        result = train(parsed, recipe.parts_builder(recipe.validate(parsed)))
    return {k: v for k, v in result.last_metrics.items() if k.startswith("data_")}


def test_data_skipped_under_subset_loading_counts_every_rank_s_reads_as_one_process_does(tmp_path):
    # each tp rank reads some of the steps and counts their bad samples; the figure is the group's
    import tarfile

    from tests.cli.test_train_shards import IMAGE, _write_bucket
    from tests.data.helpers import rewrite_shard

    _write_bucket(tmp_path, "i", IMAGE, 16, seed=2)
    for shard in sorted((tmp_path / "i").glob("*.tar")):  # one undecodable sample per shard
        first = f"{tarfile.open(shard).getnames()[0].split('.')[0]}.json"
        rewrite_shard(shard, lambda name, data, first=first: b"[]" if name == first else data)
    single = _skips(0, 1, tmp_path / "i", tmp_path / "one", {})
    # one per shard, each counted once however often the run read it again
    assert single["data_skipped"] == len(list((tmp_path / "i").glob("*.tar"))) < single["data_skip_events"]
    ranks = spawn(_skips, 2, tmp_path / "i", tmp_path / "tp", TP)
    assert ranks[0] == single
