"""``compile``'s text buckets: captions padded (masked) to a bucket length give the outputs and
gradients of the unpadded captions, and blocks compiled with static shapes compile once per bucket,
not once per caption length (one process; tests/parallel/test_compile_tp.py counts under TP2)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters

from tests.models.test_families_support import cond_for
from tests.parallel.scenarios import family_model, make_model
from vfm_parallel import ParallelDims, parallelize
from vfm_parallel.strategies.text_buckets import bucket_length, pad_text

TOL = 1e-5


def _batch(model, text_len: int, seed: int, mask: bool = True):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, model.config.in_channels, 2, 4, 4, generator=g)
    cond = cond_for(model, 2, text_len=text_len, generator=g)
    if not mask:
        del cond["text_mask"]
    return x, torch.rand(2, generator=g), cond


def _loss_and_grads(model, x, t, cond):
    model.zero_grad()
    out = model(x, t, cond)
    F.mse_loss(out, torch.zeros_like(out)).backward()
    return out.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("length, policy, padded", [(1, "pow2", 8), (8, "pow2", 8), (9, "pow2", 16), (300, "pow2", 512),
                                                    (5, 64, 64), (64, 64, 64), (65, 64, 128)])
def test_a_text_length_pads_to_its_bucket(length, policy, padded):
    assert bucket_length(length, policy) == padded


@pytest.mark.parametrize("family", ["dit-cross", "stdit"])
@pytest.mark.parametrize("mask", [True, False], ids=["masked", "no-mask"])
def test_padded_text_gives_the_outputs_and_gradients_of_the_unpadded_text(family, mask):
    model = make_model(lambda: family_model(family))
    x, t, cond = _batch(model, 5, seed=0, mask=mask)
    padded = pad_text(cond, 64)
    assert padded["text"].shape[1] == padded["text_mask"].shape[1] == 64
    out, grads = _loss_and_grads(model, x, t, cond)
    out_padded, grads_padded = _loss_and_grads(model, x, t, padded)
    assert (out_padded - out).abs().max().item() < TOL
    assert grads.keys() == grads_padded.keys()
    for name in grads:
        assert (grads_padded[name] - grads[name]).abs().max().item() < TOL, name


def test_static_compiled_blocks_compile_once_per_text_bucket_not_per_caption_length():
    """dynamic=False is what blocks holding DTensors (TP, SP) get: one graph per input shape."""
    factory = lambda: family_model("dit-cross")  # noqa: E731
    reference = make_model(factory)
    pm = parallelize(make_model(factory), ParallelDims(), ["compile"],
                     options={"compile": {"backend": "aot_eager", "dynamic": False}})
    counters.clear()
    compiles = []
    for seed, lengths in enumerate([(5, 8), (9, 16), (3, 7, 6), (12, 11, 10)]):  # buckets 8 and 16
        for length in lengths:
            x, t, cond = _batch(reference, length, seed)
            out, grads = _loss_and_grads(pm.model, x, t, cond)
            expected, expected_grads = _loss_and_grads(reference, x, t, cond)
            assert (out - expected).abs().max().item() < TOL, length
            assert max((grads[n] - expected_grads[n]).abs().max().item() for n in expected_grads) < TOL, length
        compiles.append(counters["frames"]["ok"])
    assert compiles[0] == compiles[1] - compiles[0] > 0  # a bucket compiles each block's graph once
    assert compiles[3] == compiles[2] == compiles[1]  # nine more lengths, no more compiles


def test_auto_buckets_leave_the_text_of_a_model_that_attends_to_its_padding_as_it_is():
    """Wan (use_text_mask False, as trained) attends to every text token, padding too: padded text
    changed its outputs under static compile (TP, SP) only, so a run's result hung on its layout."""
    factory = lambda: family_model("wan")  # noqa: E731
    reference = make_model(factory)
    assert not reference.parallel_plan().masks_text_padding
    pm = parallelize(make_model(factory), ParallelDims(), ["compile"],
                     options={"compile": {"backend": "aot_eager", "dynamic": False}})
    x, t, cond = _batch(reference, 5, seed=0)
    out, _ = _loss_and_grads(pm.model, x, t, cond)
    expected, _ = _loss_and_grads(reference, x, t, cond)
    assert (out - expected).abs().max().item() < TOL


def test_an_unknown_text_buckets_option_names_the_accepted_ones():
    with pytest.raises(ValueError, match=r"text_buckets must be one of 'auto', 'pow2', 'off' or a positive integer"):
        parallelize(make_model(lambda: family_model("dit-cross")), ParallelDims(), ["compile"],
                    options={"compile": {"text_buckets": "pow3"}})


class _Seen(torch.nn.Module):
    """Records the text lengths it is called with, in each calling form a root model meets."""

    def forward(self, x, t=None, cond=None, **stage_cond):
        cond = cond if cond is not None else stage_cond
        return cond["text"].shape[1], cond["text_mask"].shape[1]


def test_the_text_is_padded_in_every_form_the_root_is_called_with():
    from vfm_parallel.strategies.text_buckets import install

    seen = _Seen()
    install(seen, "pow2")
    text = {"text": torch.randn(2, 5, 4), "text_mask": torch.ones(2, 5, dtype=torch.bool)}
    assert seen(None, None, text) == (8, 8)  # model(x, t, cond)
    assert seen(None, None, cond=text) == (8, 8)  # model(x, t, cond=cond)
    assert seen(None, t=None, **text) == (8, 8)  # a pipeline stage: cond's entries as keyword arguments
