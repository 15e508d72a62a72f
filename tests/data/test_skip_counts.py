"""``data_skipped`` counts distinct samples: a corrupt sample is read again every pass (and a packing
buffer larger than a small dataset reads it many times before the first batch), yet it is one broken
sample. The events stay visible as ``data_skip_events``."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from tests.data.helpers import in_forked_group, meta, quiet, rewrite_shard, write_dataset
from vfm_data import ShardWriter, make_loader, prepare_dataset

PACKED = dict(patch_size=2, batch_size=2, max_seq_len=64)
BUCKETED = dict(patch_size=2, batch_size=2, blender="bucketed", blender_options={"durations": [1, 2, 3, 4], "batch_size": 2})


@pytest.fixture(scope="module")
def one_corrupt(tmp_path_factory):
    """8 samples in one shard, k00003's metadata corrupt."""
    folder = write_dataset(tmp_path_factory.mktemp("one_corrupt"), 8, max_shard_bytes=1 << 20)
    (shard,) = sorted(folder.glob("*.tar"))
    rewrite_shard(shard, lambda name, data: b"[]" if name == "k00003.json" else data)
    return folder


def _metrics_after(loader, steps):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the skip warnings
        for _ in range(steps):
            next(loader)
        return loader.metrics()


@pytest.mark.parametrize("options", [PACKED, BUCKETED], ids=["packed", "bucketed"])
def test_data_skipped_counts_a_corrupt_sample_once_however_often_it_is_read_again(one_corrupt, options):
    loader = make_loader(one_corrupt, **options)
    metrics = _metrics_after(loader, 10)
    assert metrics["data_skipped"] == 1 and metrics["data_corrupt"] == 1
    assert metrics["data_skip_events"] > 1  # read on every pass: the events are still there
    assert loader.affected.to_state() == {f"corrupt@{one_corrupt}/shard-000000.tar": ["k00003"]}
    assert "skipped 1 distinct samples" in loader.skip_summary()


def test_data_skipped_counts_distinct_samples_across_worker_processes(one_corrupt):
    loader = make_loader(one_corrupt, num_workers=2, **PACKED)
    assert _metrics_after(loader, 6)["data_skipped"] == 1
    loader.close()


def test_a_resumed_loader_does_not_count_a_sample_it_met_before_the_checkpoint_again(one_corrupt):
    first = make_loader(one_corrupt, **PACKED)
    assert _metrics_after(first, 3)["data_skipped"] == 1
    state = json.loads(json.dumps(first.state_dict()))  # as a checkpoint gives it back
    resumed = make_loader(one_corrupt, **PACKED)
    resumed.load_state_dict(state)
    metrics = _metrics_after(resumed, 5)
    assert metrics["data_skipped"] == 1 and metrics["data_skip_events"] > state["counts"]["corrupt"]


def test_a_crafted_affected_list_in_the_state_is_refused_naming_what_is_accepted(one_corrupt):
    loader = make_loader(one_corrupt, **PACKED)
    state = loader.state_dict()
    state["affected"] = {"corrupt@x": [1, 2]}
    with pytest.raises(ValueError, match=r"loader state 'affected'.*accepted: a mapping of 'reason@shard' to a list"):
        make_loader(one_corrupt, **PACKED).load_state_dict(state)


def test_a_cropped_sample_is_counted_by_its_reason_but_not_as_skipped(tmp_path):
    with ShardWriter(tmp_path, max_shard_bytes=1 << 20) as w:
        for i in range(4):  # the odd one: H = 5 is not divisible by the patch 2, cropped to 4
            w.write(f"s{i}", torch.randn(4, 1, 5 if i == 0 else 4, 4), torch.randn(3, 8), meta("image"))
    quiet(prepare_dataset, tmp_path)
    metrics = _metrics_after(make_loader(tmp_path, **PACKED), 6)
    assert metrics["data_patch_remainder_crop"] == 1
    assert metrics["data_skipped"] == 0 and metrics["data_skip_events"] == 0


def _group_metrics(rank, world, folder, share):
    import torch.distributed as dist

    group = dist.new_group(list(range(world)))
    loader = make_loader(folder, group=group, share=share, streams=4, **PACKED)
    metrics = _metrics_after(loader, 8)
    loader.state_dict()  # collective too: shares what metrics() already shared, and nothing twice
    return metrics, loader.metrics(), loader.skip_summary()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("share", ["turns", "gather"])
def test_a_subset_group_reports_the_distinct_samples_its_ranks_met_together(one_corrupt, share):
    ranks = in_forked_group(_group_metrics, 2, one_corrupt, share)
    for metrics, again, summary in ranks:
        assert metrics["data_skipped"] == 1 and metrics["data_corrupt"] == 1
        assert again["data_skipped"] == 1 and "skipped 1 distinct samples" in summary
    assert ranks[0][0] == ranks[1][0]  # every rank gives the group's figures
