"""Attention cores and backends: spatial/temporal regrouping, GQA, padding, packed (varlen) batches, selection."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from vfm_models.blocks.attention import AttentionCore
from vfm_models.blocks.backends import attend, select_backend


def _qkv(B, H, S, Dh, Hkv=None, seed=0, grad=False):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, S, Dh, generator=g, requires_grad=grad)
    k = torch.randn(B, Hkv or H, S, Dh, generator=g, requires_grad=grad)
    v = torch.randn(B, Hkv or H, S, Dh, generator=g, requires_grad=grad)
    return q, k, v


def _naive(q, k, v, mask=None):  # (B, H, Sq, Dh), mask (B, Sq, Sk) bool
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask[:, None], float("-inf"))
    return scores.softmax(-1) @ v


def test_spatial_core_attends_only_within_each_frame():
    T, H, W = 3, 2, 4
    q, k, v = _qkv(2, 2, T * H * W, 8)
    frame = torch.arange(T * H * W) // (H * W)
    mask = (frame[:, None] == frame[None]).expand(2, -1, -1)
    torch.testing.assert_close(AttentionCore("spatial")(q, k, v, grid=(T, H, W)), _naive(q, k, v, mask))


def test_temporal_core_attends_only_along_time_at_each_position():
    T, H, W = 3, 2, 4
    q, k, v = _qkv(2, 2, T * H * W, 8)
    spot = torch.arange(T * H * W) % (H * W)
    mask = (spot[:, None] == spot[None]).expand(2, -1, -1)
    torch.testing.assert_close(AttentionCore("temporal")(q, k, v, grid=(T, H, W)), _naive(q, k, v, mask))


def test_full_core_with_gqa_equals_repeated_key_value_heads():
    q, k, v = _qkv(2, 4, 10, 8, Hkv=2)
    expected = _naive(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1))
    torch.testing.assert_close(AttentionCore("full")(q, k, v), expected)


def test_key_padding_mask_equals_dropping_the_padded_keys_and_empty_rows_give_zeros():
    q, k, v = _qkv(3, 2, 6, 8)
    mask = torch.tensor([[1] * 6, [1, 1, 1, 0, 0, 0], [0] * 6], dtype=torch.bool)
    out = AttentionCore("cross")(q, k, v, key_padding_mask=mask)
    torch.testing.assert_close(out[0], _naive(q[:1], k[:1], v[:1])[0])
    torch.testing.assert_close(out[1], _naive(q[1:2], k[1:2, :, :3], v[1:2, :, :3])[0])
    assert torch.count_nonzero(out[2]) == 0


@pytest.mark.parametrize("kind", ["full", "spatial", "temporal"])
def test_packed_attention_forward_and_backward_equal_each_sample_alone(kind):
    grids = [(2, 2, 3), (1, 4, 2), (3, 1, 2)]
    lens = [t * h * w for t, h, w in grids]
    cu = torch.tensor([0] + lens).cumsum(0).to(torch.int32)
    q, k, v = _qkv(1, 4, sum(lens), 8, Hkv=2, grad=True)
    core = AttentionCore(kind)
    packed = core(q, k, v, grid=tuple(grids), cu_seqlens=cu, max_seqlen=max(lens))
    weights = torch.randn_like(packed)
    (packed * weights).sum().backward()
    grads = [x.grad.clone() for x in (q, k, v)]
    for i, grid in enumerate(grids):
        a, b = int(cu[i]), int(cu[i + 1])
        qs, ks, vs = (x.detach()[:, :, a:b].clone().requires_grad_() for x in (q, k, v))
        alone = core(qs, ks, vs, grid=grid)
        torch.testing.assert_close(packed[:, :, a:b], alone)
        (alone * weights[:, :, a:b]).sum().backward()
        for full_grad, x in zip(grads, (qs, ks, vs)):
            torch.testing.assert_close(full_grad[:, :, a:b], x.grad)


def test_packed_cross_attention_uses_each_samples_own_text():
    q, _, _ = _qkv(1, 2, 9, 8)
    _, k, v = _qkv(1, 2, 7, 8, seed=1)
    cu_q = torch.tensor([0, 4, 9], dtype=torch.int32)
    cu_k = torch.tensor([0, 3, 7], dtype=torch.int32)
    out = AttentionCore("cross")(q, k, v, cu_seqlens=cu_q, cu_seqlens_k=cu_k)
    torch.testing.assert_close(out[:, :, :4], _naive(q[:, :, :4], k[:, :, :3], v[:, :, :3]))
    torch.testing.assert_close(out[:, :, 4:], _naive(q[:, :, 4:], k[:, :, 3:], v[:, :, 3:]))


def test_bad_inputs_name_the_problem():
    q, k, v = _qkv(2, 3, 6, 8, Hkv=2)
    with pytest.raises(ValueError, match="multiple of key/value heads"):
        attend(q, k, v)
    q, k, v = _qkv(1, 2, 6, 8)
    with pytest.raises(ValueError, match="hold"):
        attend(q, k, v, cu_seqlens_q=torch.tensor([0, 2, 5], dtype=torch.int32))
    with pytest.raises(ValueError, match="grid"):
        AttentionCore("spatial")(q, k, v, grid=(1, 2, 2))
    with pytest.raises(ValueError, match="full, spatial, temporal, cross"):
        AttentionCore("sliding")


def test_backend_selection_prefers_fused_kernels_only_on_cuda_half_precision(monkeypatch):
    monkeypatch.delenv("VFM_ATTENTION_BACKEND", raising=False)
    everything = {"sdpa": True, "flash": True, "te": True}
    only_flash = {"sdpa": True, "flash": True, "te": False}
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert select_backend(cpu, torch.bfloat16, available=everything) == "sdpa"
    assert select_backend(cuda, torch.float32, available=everything) == "sdpa"
    assert select_backend(cuda, torch.bfloat16, available=everything) == "te"
    assert select_backend(cuda, torch.float16, available=only_flash) == "flash"
    assert select_backend(cuda, torch.bfloat16, available={"sdpa": True}) == "sdpa"
    assert select_backend(cuda, torch.bfloat16, "sdpa", available=everything) == "sdpa"
    monkeypatch.setenv("VFM_ATTENTION_BACKEND", "flash")
    assert select_backend(cpu, torch.float32, available=everything) == "flash"
    with pytest.raises(RuntimeError, match="not installed"):
        select_backend(cpu, torch.float32, available={"sdpa": True})
    with pytest.raises(ValueError, match="sdpa, flash, te"):
        select_backend(cpu, torch.float32, "xformers", available=everything)


def test_default_backend_on_cpu_is_sdpa_and_matches_the_formula():
    q, k, v = _qkv(2, 2, 5, 4)
    torch.testing.assert_close(attend(q, k, v), F.scaled_dot_product_attention(q, k, v))
    torch.testing.assert_close(attend(q, k, v), _naive(q, k, v))
