"""A freshly initialised ``wan`` model passes its text to the cross-attention at the text's own scale,
at Wan's widths and at the small widths a run from scratch on CPU uses (the demo's 64 -> 96)."""

from __future__ import annotations

import pytest
import torch

import vfm_models


@pytest.mark.parametrize("text_dim, hidden, heads", [(16, 48, 2), (64, 96, 4), (4096, 1536, 12)])
def test_wan_text_embedder_passes_unit_scale_text_at_about_unit_scale_whatever_the_width(text_dim, hidden, heads):
    """With Wan's normal(0, 0.02) the text MLP left unit text at rms 0.02 at 64 -> 96 (0.67 at 4096 -> 1536;
    1/sqrt(fan_in) gives 0.71 and 0.65), and a model trained on the demo's shards learnt to ignore the prompt."""
    torch.manual_seed(0)
    model = vfm_models.get_family("wan").create(
        "tiny", text_dim=text_dim, hidden=hidden, num_heads=heads, depth=1, ffn_dim=64, freq_dim=32)
    text = torch.randn(4, 8, text_dim, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = model.text_embedder(text)  # (B, L, hidden): what every block's cross-attention keys and values read
    rms = out.pow(2).mean().sqrt().item()
    assert 0.25 < rms < 2.0, f"text of rms 1 leaves wan's text embedder ({text_dim} -> {hidden}) at rms {rms:.3f}"
