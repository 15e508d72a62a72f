"""The real built-in families (tiny presets) under TP2+SP and PP2 (1F1B) equal their
single-process run: loss and every gradient (fp32, 2 gloo processes)."""

from __future__ import annotations

import pytest

from tests.parallel.scenarios import assert_parity, FAMILIES, real_families
from tests.gloo import spawn

TOL = 1e-5


@pytest.fixture(scope="module")
def results():
    return spawn(real_families, 2)


@pytest.mark.parametrize("layout", ["tp2+sp", "pp2-1f1b"])
@pytest.mark.parametrize("family", FAMILIES)
def test_family_layout_loss_and_every_gradient_equal_single_process(results, family, layout):
    assert_parity(results, f"{family}/{layout}", TOL)
