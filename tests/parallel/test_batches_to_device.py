"""A micro-batch goes to the GPU without making the host wait: host tensors are pinned and sent
asynchronously (a copy from ordinary host memory is synchronous on CUDA)."""

from __future__ import annotations

import pytest
import torch

from vfm_parallel.trainer.batches import to_device


def _batch() -> dict:
    return {"x0": torch.randn(2, 3, 4, 4, 4), "cond": {"text": torch.randn(2, 5, 8), "ids": [torch.arange(3)]},
            "num_tokens": 7}


def test_a_batch_keeps_its_structure_and_values_on_the_cpu():
    batch = _batch()
    moved = to_device(batch, torch.device("cpu"))
    assert moved["num_tokens"] == 7 and isinstance(moved["cond"]["ids"], list)
    assert torch.equal(moved["x0"], batch["x0"]) and torch.equal(moved["cond"]["ids"][0], batch["cond"]["ids"][0])


@pytest.mark.gpu
def test_a_batch_reaches_cuda_equal_and_without_a_host_device_sync():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    batch = _batch()
    busy = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(4):  # queued work the copy must not wait for
            busy = busy @ busy
        moved = to_device(batch, torch.device("cuda"))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert moved["x0"].device.type == "cuda" and moved["num_tokens"] == 7
    torch.testing.assert_close(moved["x0"].cpu(), batch["x0"], rtol=0, atol=0)
    torch.testing.assert_close(moved["cond"]["ids"][0].cpu(), batch["cond"]["ids"][0], rtol=0, atol=0)
