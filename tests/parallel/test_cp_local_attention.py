"""The local attention step of grouped (all-to-all) CP never reads a mask's values on the host:
whether a group's keys are all padded is data, so asking first (``bool(empty.any())``) made CUDA
wait for the device at every layer. Rows without keys still get zeros, and the result is bitwise
the one the branching version gave."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F


def _inputs(empty_rows: bool, seed: int = 0):
    """q (G, 4, L, 8), k, v (G, 2, L, 8) (GQA) and a (G, 1, 1, L) key padding mask; with
    ``empty_rows`` the second group has every key padded."""
    gen = torch.Generator().manual_seed(seed)
    g, length = 3, 6
    q = torch.randn(g, 4, length, 8, generator=gen, requires_grad=True)
    k, v = (torch.randn(g, 2, length, 8, generator=gen, requires_grad=True) for _ in range(2))
    mask = torch.rand(g, 1, 1, length, generator=gen) > 0.3
    mask[:, ..., 0] = True
    if empty_rows:
        mask[1] = False
    return q, k, v, mask


def _branching_reference(q, k, v, mask):
    """local_attention as it was: fill the empty rows only after reading on the host that some exist."""
    from vfm_parallel.cp.masks import expand_kv

    k, v = expand_kv(k, q.shape[1]), expand_kv(v, q.shape[1])
    empty = ~mask.any(-1, keepdim=True)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | empty)
    return out.masked_fill(empty, 0.0) if bool(empty.any()) else out


def _forward_backward(fn, q, k, v, mask):
    q, k, v = (x.detach().clone().requires_grad_() for x in (q, k, v))
    out = fn(q, k, v, mask)
    (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
    return out.detach(), q.grad, k.grad, v.grad


@pytest.mark.parametrize("empty_rows", [False, True], ids=["every-row-has-keys", "a-group-fully-padded"])
def test_local_attention_forward_and_backward_equal_the_branching_version_bitwise(empty_rows):
    from vfm_parallel.cp.masks import local_attention

    q, k, v, mask = _inputs(empty_rows)
    got = _forward_backward(local_attention, q, k, v, mask)
    want = _forward_backward(_branching_reference, q, k, v, mask)
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, want):
        assert torch.equal(a, b), f"{name} differs from the branching version"
    if empty_rows:
        assert torch.equal(got[0][1], torch.zeros_like(got[0][1])), "a group without keys must get zeros"
        assert torch.equal(got[1][1], torch.zeros_like(got[1][1])), "no gradient flows into a group without keys"


def test_local_attention_traces_as_one_graph_without_reading_the_mask():
    """Dynamo refuses (fullgraph) any branch on a tensor's value: the same read that syncs on CUDA."""
    from vfm_parallel.cp.masks import local_attention

    q, k, v, mask = _inputs(empty_rows=True)
    torch._dynamo.reset()
    compiled = torch.compile(local_attention, backend="eager", fullgraph=True)
    with torch.no_grad():
        assert torch.equal(compiled(q, k, v, mask), local_attention(q, k, v, mask))


@pytest.mark.gpu
def test_local_attention_on_cuda_makes_no_host_device_sync():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from vfm_parallel.cp.masks import local_attention

    q, k, v, mask = (x.detach().cuda() for x in _inputs(empty_rows=True))
    q.requires_grad_()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        local_attention(q, k, v, mask).sum().backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
