"""Classifier-free guidance, batched and CFG-parallel over two gloo ranks."""

from __future__ import annotations

import pytest
import torch

from vfm_infer.guidance import cfg_parallel, classifier_free, combine, concat_conditions
from vfm_infer.samplers.flow import FlowHeun
from tests.gloo import spawn as run_on_ranks


class TinyConditional(torch.nn.Module):
    """A small text-conditioned network: the fixture the guidance is applied to."""

    def __init__(self, dim: int = 6, text_dim: int = 4) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w = torch.nn.Parameter(torch.randn(dim, dim, generator=g) / dim**0.5)
        self.t = torch.nn.Parameter(torch.randn(text_dim, dim, generator=g))

    def forward(self, x, level, cond):
        if cond["text"].shape[0] != x.shape[0]:  # as a model refuses it: broadcasting would hide a batch-1 null
            raise ValueError(f"cond['text'] has {cond['text'].shape[0]} samples but x has {x.shape[0]}")
        text = (cond["text"] * cond["text_mask"][..., None]).sum(1)  # (B, text_dim)
        return torch.tanh(x @ self.w) * level[:, None] + text @ self.t - x


def conditions():
    g = torch.Generator().manual_seed(1)
    cond = {"text": torch.randn(2, 5, 4, generator=g), "text_mask": torch.ones(2, 5, dtype=torch.bool)}
    uncond = {"text": torch.zeros(2, 1, 4), "text_mask": torch.zeros(2, 1, dtype=torch.bool)}
    return cond, uncond


def test_combine_is_the_cfg_formula():
    c, u = torch.tensor([3.0]), torch.tensor([1.0])
    assert combine(c, u, 1.0) == c and combine(c, u, 0.0) == u and combine(c, u, 4.0) == torch.tensor([9.0])


def test_concat_conditions_pads_shorter_text_with_masked_zeros():
    cond, uncond = conditions()
    both = concat_conditions(cond, uncond)
    assert both["text"].shape == (4, 5, 4) and both["text_mask"].shape == (4, 5)
    assert not both["text_mask"][2:].any() and torch.equal(both["text"][:2], cond["text"])


def test_concat_conditions_rejects_different_keys():
    with pytest.raises(ValueError, match="same keys"):
        concat_conditions({"y": torch.zeros(1)}, {"text": torch.zeros(1)})


def test_batched_cfg_equals_separate_conditional_and_unconditional_passes():
    net, (cond, uncond) = TinyConditional(), conditions()
    x, level = torch.randn(2, 6), torch.full((2,), 0.7)
    guided = classifier_free(net, cond, uncond, 5.0)(x, level)
    expected = net(x, level, uncond) + 5.0 * (net(x, level, cond) - net(x, level, uncond))
    torch.testing.assert_close(guided, expected)


def test_guidance_scale_one_is_the_conditional_prediction():
    net, (cond, uncond) = TinyConditional(), conditions()
    x, level = torch.randn(2, 6), torch.full((2,), 0.3)
    assert torch.equal(classifier_free(net, cond, uncond, 1.0)(x, level), net(x, level, cond))


def _sample_cfg_parallel(rank: int, world: int, scale: float, null_batch: int = 2) -> torch.Tensor:
    net, (cond, uncond) = TinyConditional(), conditions()
    uncond = {k: v[:null_batch] for k, v in uncond.items()}
    noise = torch.randn(2, 6, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        return FlowHeun(6).sample(cfg_parallel(net, cond, uncond, scale), noise)


def test_cfg_parallel_on_two_ranks_equals_single_process_cfg():
    net, (cond, uncond) = TinyConditional(), conditions()
    noise = torch.randn(2, 6, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected = FlowHeun(6).sample(classifier_free(net, cond, uncond, 4.0), noise)
    outs = run_on_ranks(_sample_cfg_parallel, 2, 4.0)
    assert torch.equal(outs[0], outs[1])  # both ranks hold the same guided sample
    torch.testing.assert_close(outs[0], expected, rtol=1e-5, atol=1e-5)
    # Guidance did something: the unguided sample is far from the guided one.
    with torch.no_grad():
        plain = FlowHeun(6).sample(classifier_free(net, cond, None, 4.0), noise)
    assert (plain - expected).abs().max() > 0.1


def test_cfg_parallel_repeats_a_batch_one_null_condition_for_every_prompt():
    net, (cond, uncond) = TinyConditional(), conditions()
    noise = torch.randn(2, 6, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        expected = FlowHeun(6).sample(classifier_free(net, cond, uncond, 4.0), noise)
    outs = run_on_ranks(_sample_cfg_parallel, 2, 4.0, 1)
    torch.testing.assert_close(outs[1], expected, rtol=1e-5, atol=1e-5)


def test_cfg_parallel_needs_a_two_rank_group():
    outs = run_on_ranks(_cfg_parallel_error, 1)
    assert outs == [1]


def _cfg_parallel_error(rank: int, world: int) -> int:
    try:
        cfg_parallel(TinyConditional(), *conditions(), 2.0)
    except ValueError as e:
        return int("exactly 2 ranks" in str(e))
    return 0


def test_classifier_free_repeats_a_batch_one_null_condition_for_every_prompt():
    # vfm_models.conditioning.null_condition gives one sample; the prompts are a batch of 2
    net, (cond, uncond) = TinyConditional(), conditions()
    x, level = torch.randn(2, 6), torch.full((2,), 0.7)
    one = {k: v[:1] for k, v in uncond.items()}
    for scale in (0.0, 5.0):
        torch.testing.assert_close(classifier_free(net, cond, one, scale)(x, level),
                                   classifier_free(net, cond, uncond, scale)(x, level))


def test_classifier_free_names_both_batch_sizes_when_the_branches_differ():
    net, (cond, _) = TinyConditional(), conditions()
    cond = {k: torch.cat([v, v[:1]]) for k, v in cond.items()}  # 3 prompts
    uncond = {"text": torch.zeros(2, 1, 4), "text_mask": torch.zeros(2, 1, dtype=torch.bool)}
    with pytest.raises(ValueError, match="conditional inputs hold 3 samples but the unconditional ones 2"):
        classifier_free(net, cond, uncond, 5.0)
