"""The class-label range check on CUDA costs no host synchronisation per forward (it is an asynchronous
device assertion), and an out-of-range label there still stops the process with the range in the message.
Marked ``gpu``: skipped without CUDA."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

import vfm_models

pytestmark = pytest.mark.gpu


def _model():
    torch.manual_seed(0)
    return vfm_models.get_family("dit").create(in_channels=4, patch=(1, 2, 2), hidden=32, depth=1, num_heads=2,
                                               num_classes=4).cuda()


def test_a_class_conditional_forward_on_cuda_does_not_synchronise_for_the_label_check():
    model = _model()
    x, t, y = torch.randn(2, 4, 2, 4, 4, device="cuda"), torch.full((2,), 0.5, device="cuda"), torch.tensor([0, 4], device="cuda")
    model(x, t, {"y": y})  # warm-up: lazy initialisation may synchronise once
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # any synchronising call (y.min().item(), int(y.max())) raises
    try:
        model(x, t, {"y": y})
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


def test_an_out_of_range_label_on_cuda_stops_with_the_range_named():
    # a failed device assertion poisons the CUDA context: run it in a process of its own
    code = textwrap.dedent("""
        import torch, vfm_models
        torch.manual_seed(0)
        model = vfm_models.get_family("dit").create(in_channels=4, patch=(1, 2, 2), hidden=32, depth=1, num_heads=2,
                                                    num_classes=4).cuda()
        out = model(torch.randn(2, 4, 2, 4, 4, device="cuda"), torch.full((2,), 0.5, device="cuda"),
                    {"y": torch.tensor([1, 7], device="cuda")})
        torch.cuda.synchronize()
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    assert "device-side assert" in run.stderr or "a class label is out of range" in run.stderr
