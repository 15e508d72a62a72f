"""Context parallelism keeps every tensor on its inputs' device. The CPU tests run CP on CPU
tensors, where a buffer or mask made without ``device=`` lands on the right device by accident;
on a GPU it lands on the CPU and the run fails ("expected all tensors on the same device", or
NCCL handed a CPU buffer). Here a real ST-DiT runs forward and backward under each CP strategy on
the ``meta`` device over torch's fake process group (2 ranks, no communication), so any tensor
created on the CPU meets a meta tensor and fails the same way; so does tiled decoding."""

from __future__ import annotations

import pytest

from tests.meta_device import in_subprocess

STRATEGIES = ("cp-ring", "cp-ulysses", "cp-hybrid")


def _run_on_meta(strategy: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import vfm_models
    from vfm_parallel import ParallelDims, parallelize

    dist.init_process_group("cpu:fake,meta:fake", store=FakeStore(), rank=0, world_size=2)
    model = vfm_models.get_family("stdit").create(
        "tiny", hidden=32, num_heads=4, depth=2, text_dim=16, in_channels=4, patch=(1, 2, 2), pos_embed="rope",
        full_attention_blocks=(1,)).to("meta")
    latent = (3, 4, 6)  # grid (3, 2, 3): 18 tokens, 9 per rank; t = 3 frames, so spatial all-to-all moves data
    pm = parallelize(model, ParallelDims(cp=2, dp_shard=1), strategies=[strategy], device_type="cpu", tokens=18)
    x = torch.randn(2, 4, *latent, device="meta")
    cond = {"text": torch.randn(2, 5, 16, device="meta"), "text_mask": torch.ones(2, 5, dtype=torch.bool, device="meta")}
    out = pm.model(x, torch.rand(2, device="meta"), cond)
    out.float().pow(2).mean().backward()
    assert out.device.type == "meta" and out.shape == x.shape
    missing = [n for n, p in pm.model.named_parameters() if p.grad is None or p.grad.device.type != "meta"]
    assert not missing, missing


def _decode_on_meta() -> None:
    import torch

    import vfm_models
    from vfm_infer.decode import decode_tiled

    tokenizer = vfm_models.get_tokenizer("pixel")(patch=2)
    pixels = decode_tiled(tokenizer, torch.randn(1, 12, 2, 8, 8, device="meta"), tile=4, overlap=2)
    assert pixels.device.type == "meta" and pixels.shape == (1, 3, 2, 16, 16)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_cp_forward_and_backward_keep_every_tensor_on_the_inputs_device(strategy):
    in_subprocess("tests.parallel.test_cp_device_placement", f"_run_on_meta({strategy!r})")


def test_tiled_decoding_keeps_every_tensor_on_the_latents_device():
    in_subprocess("tests.parallel.test_cp_device_placement", "_decode_on_meta()")
