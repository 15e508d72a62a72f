"""FLOP counts: exact per-token counts against torch's FlopCounterMode, and the published DiT figures."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

import vfm_models
from vfm_models.flops import count_params, flops_per_token, model_flops_per_token

from .test_families_support import cond_for, tiny

CASES = [
    ("dit", {}),
    ("dit-cross", {}),
    ("dit-cross", {"adaln_lora_rank": 8}),
    ("moviegen", {}),
    ("stdit", {"full_attention_blocks": (1,)}),
]


@pytest.mark.parametrize("name, overrides", CASES, ids=[f"{n}{'-lora' if o.get('adaln_lora_rank') else ''}" for n, o in CASES])
def test_flops_per_token_matches_torch_flop_counter_within_3_percent(name, overrides):
    model = tiny(name, hidden=64, num_heads=4, **overrides)
    grid, text_len = (2, 4, 6), 5
    x = torch.randn(1, model.config.in_channels, 2, 8, 12, requires_grad=True)
    cond = cond_for(model, 1, text_len=text_len)
    if "text" in cond:
        cond["text"].requires_grad_(True)
    # the math kernel decomposes attention into matmuls the counter sees (CPU flash attention is not counted)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(x, torch.rand(1), cond).sum().backward()
    counted = counter.get_total_flops() / 48
    predicted = flops_per_token(model, grid, text_len if model.config.text_dim else 0)
    assert abs(predicted / counted - 1) < 0.03, (predicted, counted)


@pytest.mark.parametrize(
    "preset, layers, hidden, tflops, tokens_per_s",
    [("7B", 32, 3072, 519, 10052), ("28B", 48, 5120, 468, 2510)],
)
def test_six_n_convention_reproduces_the_published_dit_throughput_table(preset, layers, hidden, tflops, tokens_per_s):
    """Seeds' table: DiT 7B at 8k tokens, 519 TFLOP/s at 10052 tokens/s/GPU (28B: 468 at 2510)."""
    with torch.device("meta"):
        model = vfm_models.get_family("dit-cross").create(preset)
    cfg = model.config
    assert (cfg.depth, cfg.hidden) == (layers, hidden)
    per_token = model_flops_per_token(count_params(model), layers, hidden, 8192)
    assert abs(per_token * tokens_per_s / 1e12 / tflops - 1) < 0.02


def test_flops_per_token_needs_the_text_length_of_cross_attention_models():
    with pytest.raises(ValueError, match="text_len"):
        flops_per_token(tiny("dit-cross"), (1, 2, 2))
