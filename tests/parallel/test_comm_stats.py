"""Communication accounting records bytes per collective kind and layer, and resets."""

from __future__ import annotations

import pytest
import torch

from vfm_parallel import comm_stats


def test_record_snapshot_and_reset():
    comm_stats.reset()
    comm_stats.record("all_gather", "sp.region", comm_stats.tensor_bytes(torch.zeros(2, 3)))
    comm_stats.record("all_gather", "sp.stack", 8)
    comm_stats.record("p2p", "cp.ring", 100)
    snap = comm_stats.snapshot()
    assert snap["all_gather"] == {"total": 32, "calls": 2, "by_layer": {"sp.region": 24, "sp.stack": 8}}
    assert comm_stats.total() == 132 and comm_stats.total("p2p") == 100
    comm_stats.reset()
    assert comm_stats.snapshot() == {} and comm_stats.total() == 0


def test_negative_bytes_are_rejected():
    with pytest.raises(ValueError, match="nbytes must be >= 0"):
        comm_stats.record("all_reduce", "x", -1)
