"""cp2 with FSDP2 on two gloo ranks: no block hands FSDP a view, and the step equals one process.

FSDP2 registers its pre-backward hook on each wrapped block's output and warns when that output is
a view (an in-place op on it would drop the hook). Context parallelism joins the sequence after the
last block, so the tensor that join makes is the last block's output.
"""

from __future__ import annotations

import warnings

import pytest

from tests.gloo import spawn
from tests.parallel.scenarios import assert_parity, family_batch, family_model, parity
from tests.parallel.toy_model import ToyDiT
from vfm_parallel import ParallelDims

TOL = 1e-5  # as tests/parallel/test_strategies_2proc.py
VIEW_WARNING = "returned a view tensor"


def _cp2_fsdp(rank, world):
    """Both models under fsdp x cp-ring (cp=2, dp_shard=1): gradient parity and FSDP's warnings."""
    out = {}
    dit_batch = family_batch("dit")
    layouts = {
        "toy": {},
        "dit": {"factory": lambda: family_model("dit"), "batch": dit_batch},
    }
    for name, kwargs in layouts.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = parity(ParallelDims(cp=2), ["fsdp", "cp-ring"], {"cp-ring": {"average_gradients": False}},
                            factory=kwargs.get("factory", ToyDiT), batch=kwargs.get("batch"))
        result["view_warnings"] = [str(w.message) for w in caught if VIEW_WARNING in str(w.message)]
        out[name] = result
    return out


@pytest.fixture(scope="module")
def results():
    return spawn(_cp2_fsdp, 2)


@pytest.mark.parametrize("model", ["toy", "dit"])
def test_cp2_fsdp_blocks_return_no_view_tensor_to_fsdp(results, model):
    for rank, rank_result in enumerate(results):
        assert rank_result[model]["view_warnings"] == [], f"rank {rank}: {rank_result[model]['view_warnings'][:1]}"


@pytest.mark.parametrize("model", ["toy", "dit"])
def test_cp2_fsdp_loss_and_every_gradient_equal_single_process(results, model):
    assert_parity(results, model, TOL)
