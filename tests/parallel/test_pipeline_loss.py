"""The pipeline schedule's loss reads a network output as the formulations do: a learned-sigma
output (twice the data's channels) counts with its prediction half; other counts are refused."""

from __future__ import annotations

import pytest
import torch

from vfm_models.formulations.base import weighted_mse
from vfm_parallel.trainer.pipeline import pack_target, packed_weighted_mse


@pytest.mark.parametrize("channels", [1, 4])
def test_a_learned_sigma_output_counts_with_its_prediction_half_as_in_the_formulations(channels):
    g = torch.Generator().manual_seed(0)
    out = torch.randn(2, 2 * channels, 3, 4, 4, generator=g)
    target = torch.randn(2, channels, 3, 4, 4, generator=g)
    weight = torch.rand(2, 1, 1, 1, 1, generator=g)
    loss = packed_weighted_mse(out, pack_target(target, weight))
    torch.testing.assert_close(loss, weighted_mse(out, target, weight), rtol=0, atol=0)
    # the variance half does not enter: changing it leaves the loss as it was
    out[:, channels:] += 10.0
    torch.testing.assert_close(packed_weighted_mse(out, pack_target(target, weight)), loss, rtol=0, atol=0)


def test_an_output_of_another_channel_count_is_refused_not_broadcast():
    target, weight = torch.zeros(2, 1, 3, 4, 4), torch.ones(2, 1, 1, 1, 1)
    with pytest.raises(ValueError, match=r"3 channels for a target of 1; accepted: 1, or 2"):
        packed_weighted_mse(torch.zeros(2, 3, 3, 4, 4), pack_target(target, weight))
