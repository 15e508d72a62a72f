"""Ring attention decides which K/V blocks to skip from the grid's ints on the host, never from a
mask's values (``mask.any()`` waits for the device once per hop on CUDA). Skipping is exact: the
host rule says "no query meets any key" exactly when the mask the ring would build is all False;
a block with every key padded is computed (not skipped) and still matches full attention."""

from __future__ import annotations

import itertools

import pytest
import torch

from tests.gloo import spawn
from tests.meta_device import in_subprocess

GRIDS = [(4, 2, 3), (3, 2, 2), (1, 1, 7), (5, 1, 1), ((2, 2, 2), (2, 2, 4)), ((1, 1, 5), (2, 2, 2), (1, 1, 11))]


# dense full attention is left out: one sample, so every block meets every block
@pytest.mark.parametrize("kind, grid", [(kind, g) for kind in ("full", "spatial", "temporal") for g in GRIDS
                                        if kind != "full" or isinstance(g[0], tuple)], ids=str)
def test_ring_skip_decided_on_host_equals_an_all_false_block_mask(kind, grid):
    from vfm_parallel.cp.masks import block_mask, grid_tokens, group_ids, grids_of, ranges_meet

    packed = len(grids_of(grid)) > 1
    s = grid_tokens(grid)
    lengths = [t * h * w for t, h, w in grids_of(grid)]
    cu = torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int32) if packed else None
    groups = group_ids(kind, grid) if kind != "full" else None
    # every pair of ranges a ring over any cp could produce, and uneven ones too
    ranges = [(a, b) for a in range(s) for b in range(a + 1, s + 1) if (b - a) <= 6 or b - a == s - a]
    for q_range, k_range in itertools.product(ranges, ranges[::3]):
        mask = block_mask(torch.arange(*q_range), torch.arange(*k_range), groups=groups, cu_seqlens=cu)
        expected = bool(mask.any())
        assert ranges_meet(kind, grid, q_range, k_range) == expected, (q_range, k_range)


def _padded_block_case(rank, world):
    """Full attention whose first S/4 keys are padding for every sample: at cp=4 rank 0's whole K/V
    block is masked (the ring computes it, since only the grid decides skips), at cp=2 half of it."""
    import torch.distributed as dist
    from vfm_models.blocks.attention import AttentionCore

    from vfm_parallel.cp import ContextParallelCore

    gen = torch.Generator().manual_seed(7)
    b, h, grid = 2, 4, (4, 2, 3)
    s = 24
    q, k, v = (torch.randn(b, h, s, 8, generator=gen, requires_grad=True) for _ in range(3))
    w_out = torch.randn(b, h, s, 8, generator=gen)
    mask = torch.ones(b, s, dtype=torch.bool)
    mask[:, : s // 4] = False
    inner = AttentionCore("full")
    ref = inner(q, k, v, grid=grid, key_padding_mask=mask)
    (ref * w_out).sum().backward()
    n = s // world
    part = slice(rank * n, (rank + 1) * n)
    ql, kl, vl = (x.detach()[:, :, part].clone().requires_grad_() for x in (q, k, v))
    out = ContextParallelCore(inner, "full", dist.group.WORLD, "ring")(ql, kl, vl, grid=grid, key_padding_mask=mask[:, part])
    (out * w_out[:, :, part]).sum().backward()
    return max((out - ref[:, :, part]).abs().max().item(), (ql.grad - q.grad[:, :, part]).abs().max().item(),
               (kl.grad - k.grad[:, :, part]).abs().max().item(), (vl.grad - v.grad[:, :, part]).abs().max().item())


@pytest.mark.parametrize("cp", [2, 4])
def test_ring_attention_with_a_fully_padded_kv_block_matches_full_attention(cp):
    worst = max(spawn(_padded_block_case, cp))
    assert worst < 1e-5, f"ring attention with a fully padded K/V block differs from full attention by {worst:.1e}"


def _ring_without_sync() -> None:
    """Ring spatial attention (3 of 4 blocks skipped) on CUDA over torch's fake process group (4
    ranks, no communication) with CUDA's sync debug mode set to raise on any host-device sync."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore
    from vfm_models.blocks.attention import AttentionCore

    from vfm_parallel.cp import ContextParallelCore

    dist.init_process_group("cpu:fake,cuda:fake", store=FakeStore(), rank=1, world_size=4)
    q, k, v = (torch.randn(2, 4, 6, 8, device="cuda", requires_grad=True) for _ in range(3))
    core = ContextParallelCore(AttentionCore("spatial"), "spatial", dist.group.WORLD, "ring")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    core(q, k, v, grid=(4, 2, 3)).sum().backward()
    torch.cuda.set_sync_debug_mode("default")


@pytest.mark.gpu
def test_ring_attention_forward_and_backward_make_no_host_device_sync():
    in_subprocess("tests.parallel.test_cp_ring_blocks", "_ring_without_sync()")  # the fake group stays the default group


@pytest.mark.parametrize("q_range, k_range", [((0, 4), (0, 4)), ((0, 4), (4, 8))], ids=["same-sample", "other-sample"])
def test_ranges_meet_refuses_an_unknown_kind_whatever_the_ranges(q_range, k_range):
    # a misspelt kind answered False for blocks of different samples: the ring would skip them silently
    from vfm_parallel.cp.masks import ranges_meet

    with pytest.raises(ValueError, match=r"takes full, spatial or temporal attention, got 'ful'"):
        ranges_meet("ful", ((1, 1, 4), (1, 1, 4)), q_range, k_range)
