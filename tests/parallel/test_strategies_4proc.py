"""4-process layouts (HSDP, FSDP2xTP2, PP2xTP2, HSDP2x1xTP2) against the single-process run, and the RNG
streams against seed table 3, in one spawned gloo group."""

from __future__ import annotations

import pytest

from tests.parallel.scenarios import assert_parity, four_rank_all
from tests.gloo import spawn

TOL = 1e-5

#: Seed table 3: Diff/Same per parallel dimension (DP spans dp_replicate and dp_shard).
TABLE_3 = {
    "timestep": {"dp_replicate": "diff", "dp_shard": "diff", "cp": "same", "pp": "same", "tp": "same"},
    "noise": {"dp_replicate": "diff", "dp_shard": "diff", "cp": "diff", "pp": "same", "tp": "same"},
    "init": {"dp_replicate": "same", "dp_shard": "same", "cp": "same", "pp": "diff", "tp": "diff"},
    "init-replicated": {"dp_replicate": "same", "dp_shard": "same", "cp": "same", "pp": "same", "tp": "same"},
}


@pytest.fixture(scope="module")
def results():
    return spawn(four_rank_all, 4)


@pytest.mark.parametrize("layout", ["hsdp2x2", "fsdp2xtp2", "pp2xtp2", "hsdp2x1xtp2", "tp2xcp2", "fsdp2xcp2", "tp2xcp2-no-fsdp"])
def test_layout_loss_and_every_gradient_equal_single_process(results, layout):
    if layout not in results[0]:
        pytest.skip(f"{layout}: the cp strategies are not registered")
    assert_parity(results, layout, TOL)


@pytest.mark.parametrize("stream", sorted(TABLE_3))
def test_rng_stream_matches_seed_table_3_on_every_dimension(results, stream):
    for rank_result in results:
        assert rank_result["rng"][stream] == TABLE_3[stream]
