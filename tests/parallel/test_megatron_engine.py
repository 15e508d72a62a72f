"""The Megatron engine (megatron-core Column/RowParallelLinear) under TP2 and TP2+SP equals the
single-process run of the same model and batch: loss and every gradient (fp32, 2 gloo processes),
on the toy DiT and the real dit-cross (tiny) family; and its errors without megatron-core / CUDA."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

from tests.parallel.scenarios import assert_parity, family_batch, family_model, parity
from tests.gloo import spawn
from vfm_parallel import HardwareError, LayoutError, ParallelDims, parallelize
from vfm_parallel.strategy import get_strategy

TOL = 1e-5
# find_spec imports only the light "megatron" namespace, not megatron.core (~9 s)
HAVE_MEGATRON = importlib.util.find_spec("megatron") is not None and importlib.util.find_spec("megatron.core") is not None
needs_megatron = pytest.mark.skipif(not HAVE_MEGATRON, reason="megatron-core is not installed: pip install 'vfm-parallel[megatron]'")

MODELS = ("toy", "dit-cross")
LAYOUTS = {"tp2": "megatron-tp", "tp2+sp": "megatron-sp"}


def _cpu_buffers_for_megatron_sp() -> None:
    """megatron-core 0.16 allocates its SP all-gather/reduce-scatter buffers on
    torch.cuda.current_device(), which raises on this CPU-only torch; point it at the CPU so that
    megatron's real SP collectives run over gloo (the only thing changed is that buffer's device)."""
    torch.cuda.current_device = lambda: "cpu"


def megatron_layouts(rank, world):
    from vfm_parallel.engines.megatron.layers import full_grad

    def run(strategy):
        out = {"toy": parity(ParallelDims(tp=2), [strategy], full_grad=full_grad)}
        out["dit-cross"] = parity(ParallelDims(tp=2), [strategy], factory=lambda: family_model("dit-cross"),
                                  batch=family_batch("dit-cross"), full_grad=full_grad)
        return out

    results = {f"{model}/tp2": r for model, r in run("megatron-tp").items()}  # real CPU, no shim
    try:  # megatron-sp refuses where megatron's buffers cannot be allocated: in its check, before any collective
        parallelize(family_model("dit-cross"), ParallelDims(tp=2), ["megatron-sp"])
        results["sp_error"] = None
    except LayoutError as error:  # a run refuses it; only `vfm train --validate` downgrades a HardwareError to a note
        results["sp_error"] = str(error)
        results["sp_error_is_hardware"] = isinstance(error, HardwareError)
    _cpu_buffers_for_megatron_sp()
    results.update({f"{model}/tp2+sp": r for model, r in run("megatron-sp").items()})
    return results


@pytest.fixture(scope="module")
def results():
    return spawn(megatron_layouts, 2)


@needs_megatron
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("model", MODELS)
def test_megatron_layout_loss_and_every_gradient_equal_single_process(results, model, layout):
    assert_parity(results, f"{model}/{layout}", TOL)


@needs_megatron
def test_megatron_sp_without_cuda_buffers_names_the_megatron_call(results):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available: megatron-sp's buffers can be allocated")
    error = results[0]["sp_error"]
    assert error is not None and "\n" not in error and results[0]["sp_error_is_hardware"]
    assert error.startswith("megatron-sp: megatron-core's sequence-parallel layers need CUDA")
    assert "torch.cuda.current_device()" in error and error.endswith("without CUDA use vfm's 'sp' (or 'tp'), or 'megatron-tp'")


def test_missing_megatron_core_says_how_to_install(monkeypatch):
    for name in [n for n in sys.modules if n == "megatron" or n.startswith("megatron.")] + ["megatron"]:
        monkeypatch.setitem(sys.modules, name, None)  # import megatron... now raises ImportError
    monkeypatch.delitem(sys.modules, "vfm_parallel.engines.megatron.layers", raising=False)
    strategy = get_strategy("megatron-tp")
    with pytest.raises(ImportError, match=r"pip install 'vfm-parallel\[megatron\]'"):
        strategy.apply(family_model("dit"), mesh=None, plan=family_model("dit").parallel_plan())
