"""Every 2-process layout against the single-process run: loss and every gradient (fp32, gloo)."""

from __future__ import annotations

import pytest

from tests.parallel.scenarios import assert_parity, two_rank_layouts
from tests.gloo import spawn

TOL = 1e-5


@pytest.fixture(scope="module")
def results():
    return spawn(two_rank_layouts, 2)


LAYOUTS = ["tp2", "tp2+sp", "fsdp2", "ddp2", "pp2-gpipe", "pp2-1f1b", "fsdp2+ac-full", "tp2+sp+ac-selective",
           "fsdp2+compile"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layout_loss_and_every_gradient_equal_single_process(results, layout):
    assert_parity(results, layout, TOL)


def test_pp_conditioning_embedders_stay_bitwise_identical_after_five_steps(results):
    for r in results:
        assert r["pp2-embedders"]["bitwise_equal"]
        assert r["pp2-embedders"]["moved"] > 0  # the optimizer did change them
