"""vfm_parallel.cp.comm.all_to_all on gloo: the exchange context parallelism's Ulysses and group
attention run on, in real gloo process groups, on every torch release the package admits (torch 2.11's
gloo has no list all_to_all, only all_to_all_single)."""

from __future__ import annotations

import pytest
import torch

from tests.gloo import spawn


def _exchange(rank, world, shapes):
    from vfm_parallel.cp.comm import all_to_all

    # send[j] from rank r holds 100 * r + j everywhere, so each received value names its sender
    send = [torch.full(shapes[j], 100.0 * rank + j, requires_grad=True) for j in range(world)]
    recv = all_to_all(send, [shapes[rank]] * world, None, "test")
    # each received chunk weighted by its sender + 1: the gradient sent back tells who got what
    sum((i + 1) * r.sum() for i, r in enumerate(recv)).backward()
    return [r.detach() for r in recv], [s.grad for s in send]


@pytest.mark.parametrize("world", [2, 3])
def test_equal_chunk_all_to_all_on_gloo_delivers_each_chunk_and_routes_its_gradient_back(world):
    shapes = [(2, 3, 4)] * world
    for rank, (recv, grads) in enumerate(spawn(_exchange, world, shapes)):
        for sender, chunk in enumerate(recv):
            torch.testing.assert_close(chunk, torch.full(shapes[rank], 100.0 * sender + rank), rtol=0, atol=0)
        for dest, grad in enumerate(grads):
            torch.testing.assert_close(grad, torch.full(shapes[dest], rank + 1.0), rtol=0, atol=0)
