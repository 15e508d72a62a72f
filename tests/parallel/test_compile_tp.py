"""``compile`` with TP: a compiled block whose inputs change shape between steps (captions of
another length, another bucket) still equals the eager single-process run, and compiles once per
text bucket, not once per caption length (2 gloo processes)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters

from tests.gloo import spawn
from tests.models.test_families_support import cond_for
from tests.parallel.scenarios import family_model, make_model
from vfm_parallel import ParallelDims, parallelize

TOL = 1e-5


def _batch(model, text_len: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, model.config.in_channels, 2, 4, 4, generator=g)
    return x, torch.rand(2, generator=g), cond_for(model, 2, text_len=text_len, generator=g)


def _losses_and_grads(model, batches, sync_grads=lambda: None):
    out = []
    for x, t, cond in batches:
        model.zero_grad()
        loss = F.mse_loss(model(x, t, cond), torch.zeros_like(x))
        loss.backward()
        sync_grads()  # TP: sums the partial gradients of replicated parameters
        grads = {n: (p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad).detach().clone()
                 for n, p in model.named_parameters()}
        out.append((loss.item(), grads))
    return out


def _tp2_compiled_against_eager(rank, world, family):
    factory = lambda: family_model(family)  # noqa: E731
    reference = make_model(factory)
    batches = [_batch(reference, text_len, seed) for seed, text_len in enumerate(CAPTION_LENGTHS)]
    expected = _losses_and_grads(reference, batches)
    pm = parallelize(make_model(factory), ParallelDims(tp=2), ["tp", "compile"],
                     options={"compile": {"backend": "aot_eager"}})
    counters.clear()
    got = _losses_and_grads(pm.model, batches, pm.sync_grads)
    diffs = [(abs(a[0] - b[0]), max((a[1][n] - b[1][n]).abs().max().item() for n in b[1]))
             for a, b in zip(got, expected)]
    return diffs, counters["frames"]["ok"]


#: Six caption lengths in two text buckets (8 and 16 tokens): they compiled six times.
CAPTION_LENGTHS = (5, 7, 9, 6, 11, 13)


@pytest.mark.parametrize("family", ["stdit", "dit-cross"])
def test_tp2_compiled_blocks_equal_eager_when_the_caption_length_changes(family):
    for diffs, compiles in spawn(_tp2_compiled_against_eager, 2, family):
        for step, (loss_diff, grad_diff) in enumerate(diffs):
            assert loss_diff < TOL and grad_diff < TOL, (family, step, loss_diff, grad_diff)
        blocks = len(family_model(family).blocks)
        assert 0 < compiles <= 2 * blocks, f"{family}: {compiles} compiles for 2 text buckets x {blocks} blocks"
