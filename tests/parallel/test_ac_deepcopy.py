"""A model whose blocks ``ac`` checkpoints stays a self-contained module: a deep copy of it (the usual
way to start an EMA model, as facebookresearch/DiT's train.py does) runs its own weights, not those of
the model it was copied from."""

from __future__ import annotations

import copy

import torch

from tests.parallel.scenarios import family_batch, family_model
from vfm_parallel import ParallelDims, parallelize


def _batch_and_models(mode: str):
    torch.manual_seed(0)
    model = family_model("dit-cross")
    parallelize(model, ParallelDims(), ["ac"], options={"ac": {"mode": mode}})
    copied = copy.deepcopy(model)
    with torch.no_grad():
        for p in copied.parameters():
            p.add_(torch.randn_like(p))
    reference = family_model("dit-cross")
    reference.load_state_dict(copied.state_dict())
    return family_batch("dit-cross"), model, copied, reference


def test_deep_copy_of_a_checkpointed_model_computes_with_its_own_weights():
    for mode in ("full", "selective"):
        (x, t, cond, target), model, copied, reference = _batch_and_models(mode)
        out = copied(x, t, cond)
        torch.testing.assert_close(out, reference(x, t, cond), rtol=0, atol=0)
        out.square().mean().backward()
        grads = [p.grad for p in copied.blocks.parameters()]
        assert all(g is not None for g in grads), f"{mode}: the copy's blocks got no gradient"
        assert all(p.grad is None for p in model.parameters()), f"{mode}: the original got the copy's gradients"


def test_deep_copy_of_a_checkpointed_model_still_recomputes_its_blocks():
    (x, t, cond, _), _, copied, _ = _batch_and_models("full")
    runs = [0]
    copied.blocks[0].mlp.register_forward_hook(lambda *_: runs.__setitem__(0, runs[0] + 1))
    copied(x, t, cond).sum().backward()
    assert runs[0] == 2, f"block 0's MLP ran {runs[0]} times in a forward and backward; checkpointed: 2"
