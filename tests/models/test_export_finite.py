"""Nothing non-finite is ever exported: ``save_export`` refuses inf/nan weights, naming them,
before it writes anything."""

from __future__ import annotations

import pytest
import torch

from tests.infer.tiny import tiny_dit, tiny_meta
from vfm_models.export import NonFiniteWeightsError, save_export


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_save_export_refuses_non_finite_weights_naming_them_and_writes_nothing(tmp_path, value):
    model = tiny_dit()
    with torch.no_grad():
        model.final_layer.linear.weight[0, 0] = value
    with pytest.raises(NonFiniteWeightsError, match=r"1 of \d+ weight tensors hold inf or nan values \(final_layer.linear.weight\)"):
        save_export(tmp_path / "export", model, {**tiny_meta(), "config": model.config})
    assert not (tmp_path / "export").exists()
