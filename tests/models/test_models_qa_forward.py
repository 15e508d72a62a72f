"""A batch whose noise levels do not match its samples is one error naming both counts, in every family."""

from __future__ import annotations

import pytest
import torch

from .test_families_support import FAMILIES, cond_for, tiny


@pytest.mark.parametrize("family", FAMILIES)
def test_noise_levels_of_another_batch_size_are_refused_naming_both(family):
    """t of 3 with x of 2 (and cond of 3) was a RuntimeError inside the first block ("size of tensor a (2)
    must match the size of tensor b (3)"); one level for all, t of shape (1,), still broadcasts."""
    model = tiny(family).eval()
    x = torch.randn(2, model.config.in_channels, 1, 4, 4)
    with pytest.raises(ValueError, match=r"t has 3 noise levels but x has 2 samples; t must be \(B,\) = \(2,\), or \(1,\)"):
        model(x, torch.rand(3), cond_for(model, 3, text_len=3))
    with torch.no_grad():
        shared = model(x, torch.full((1,), 0.3), cond_for(model, 1, text_len=3))
        each = model(x, torch.full((2,), 0.3), {k: v.expand(2, *v.shape[1:]) for k, v in cond_for(model, 1, 3).items()})
    assert torch.allclose(shared, each, atol=1e-6)
