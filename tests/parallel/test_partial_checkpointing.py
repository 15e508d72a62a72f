"""Partial and selective activation checkpointing: ``parallel.activation_checkpointing`` = false |
true | "full" | "selective" and ``parallel.checkpoint_blocks`` (the first n blocks of each stage),
through the trainer's config into the real ``ac`` strategy on a real tiny dit-cross; and the
planner's count of what selective checkpointing keeps, against the real block."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from tests.parallel.scenarios import family_batch, family_model
from tests.parallel.trainer_helpers import build_parts, run_config, tiny_config
from tests.parallel.trainer_helpers import one_thread  # noqa: F401 (autouse: one CPU thread per test)
from vfm_parallel.planner import ModelSpec
from vfm_parallel.strategies.checkpointing import _save_compute_ops
from vfm_parallel.trainer.config import ConfigError, ParallelConfig, from_dict
from vfm_parallel.trainer.distributed import parallelize_model

ONE = {"pp": 1, "dp_replicate": 1, "dp_shard": 1, "cp": 1, "tp": 1}


def _deep_dit_cross(depth: int = 4):
    """The tiny dit-cross with ``depth`` blocks (AdaLN unzeroed so every block carries signal)."""
    import vfm_models
    from tests.models.test_families_support import unmodulated

    torch.manual_seed(0)
    return unmodulated(vfm_models.get_family("dit-cross").create("tiny", depth=depth))


class _SavedByPolicy(TorchDispatchMode):
    """Calls of, and elements output by, the ops that selective checkpointing's policy keeps
    (matmuls and attention); a cached result the policy hands back in a recompute is not a call."""

    def __init__(self):
        super().__init__()
        self.save, self.calls, self.elements = _save_compute_ops(), 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in self.save:
            self.calls += 1
            self.elements += sum(o.numel() for o in (out if isinstance(out, (tuple, list)) else (out,))
                                 if isinstance(o, torch.Tensor))
        return out


def _step(model, batch):
    """Loss and gradients of one forward/backward, how often each block's MLP ran (a block
    checkpointed in full or selectively runs its forward again in backward) and how many matmul
    and attention calls the step made (selective checkpointing keeps their outputs: no more)."""
    calls = [0] * len(model.blocks)
    hooks = [b.mlp.register_forward_hook(lambda *_, i=i: calls.__setitem__(i, calls[i] + 1)) for i, b in enumerate(model.blocks)]
    x, t, cond, target = batch
    with _SavedByPolicy() as ops:
        loss = F.mse_loss(model(x, t, cond), target)
        loss.backward()
    for h in hooks:
        h.remove()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}, calls, ops.calls


@pytest.mark.parametrize("mode", ["full", "selective", True])
@pytest.mark.parametrize("blocks", [0, 1, 3])
def test_checkpointing_the_first_n_blocks_recomputes_those_and_gives_the_plain_gradients(mode, blocks):
    batch = family_batch("dit-cross")
    plain_loss, plain_grads, plain_calls, plain_matmuls = _step(_deep_dit_cross(), batch)
    assert plain_calls == [1, 1, 1, 1]
    cfg = ParallelConfig(activation_checkpointing=mode, checkpoint_blocks=blocks)
    pm = parallelize_model(_deep_dit_cross(), cfg, ONE, torch.device("cpu"))
    assert pm.strategies == ["ac"]
    loss, grads, calls, matmuls = _step(pm.model, batch)
    asked = blocks or 4
    assert calls == [2] * asked + [1] * (4 - asked)  # the first n blocks ran their forward twice
    per_block = 13  # a dit-cross block's forward: 11 linears, 2 attentions
    assert matmuls == plain_matmuls + (0 if mode == "selective" else asked * per_block)
    assert torch.equal(loss, plain_loss)
    for name, grad in plain_grads.items():  # recomputation on CPU is deterministic
        torch.testing.assert_close(grads[name], grad, rtol=1e-6, atol=1e-7, msg=name)


def test_the_trainer_checkpoints_the_configured_blocks_and_trains_like_the_plain_run(tmp_path):
    """Through ``vfm train``'s config: selective checkpointing of 1 of the tiny dit's 2 blocks."""
    calls: list[list[int]] = []

    def counting(ctx):
        parts = build_parts(ctx)
        counts = [0] * len(parts.model.blocks)
        for i, block in enumerate(parts.model.blocks):
            block.mlp.register_forward_hook(lambda *_, i=i: counts.__setitem__(i, counts[i] + 1))
        calls.append(counts)
        return parts

    from vfm_parallel.trainer import train

    plain = run_config(tiny_config(tmp_path / "plain", train={"steps": 3}))
    cfg = from_dict(tiny_config(tmp_path / "ac", train={"steps": 3},
                                parallel={"activation_checkpointing": "selective", "checkpoint_blocks": 1}), 1)
    checkpointed = train(cfg, counting)
    first, second = calls[0]
    assert first - second == 3  # block 0 ran once more per step (its recompute), block 1 did not
    steps = sorted(plain.losses)
    assert [checkpointed.losses[s] for s in steps] == pytest.approx([plain.losses[s] for s in steps], rel=1e-6)


def _four_block_parts(counts):
    """The tiny run with a 4-block dit (2 per pipeline stage), counting each block's MLP calls."""

    def build(ctx):
        import vfm_models

        parts = build_parts(ctx)
        torch.manual_seed(0)
        parts.model = vfm_models.get_family("dit").create("tiny", in_channels=3, patch=(1, 2, 2), num_classes=4,
                                                          hidden=16, num_heads=2, depth=4)
        for i, block in enumerate(parts.model.blocks):
            block.mlp.register_forward_hook(lambda *_, i=i: counts.__setitem__(i, counts[i] + 1))
        return parts

    return build


def _pp2_partial(rank, world, root):
    import os

    from vfm_parallel.trainer import train

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    out = {}
    for name, extra in {"plain": {}, "first1": {"activation_checkpointing": True, "checkpoint_blocks": 1}}.items():
        counts = [0, 0, 0, 0]
        cfg = tiny_config(root / name, train={"steps": 3}, parallel={"pp": 2, "dp_shard": 1, **extra})
        out[name] = (train(from_dict(cfg, world), _four_block_parts(counts)).losses, counts)
    return out


def test_checkpoint_blocks_counts_per_pipeline_stage_and_trains_like_no_checkpointing(tmp_path):
    """pp = 2 over gloo, 4 blocks: checkpoint_blocks = 1 recomputes the first block of each stage."""
    from tests.gloo import spawn

    ranks = spawn(_pp2_partial, 2, tmp_path)
    for rank, result in enumerate(ranks):
        (plain_losses, plain_counts), (losses, counts) = result["plain"], result["first1"]
        first, second = 2 * rank, 2 * rank + 1  # this stage's blocks
        assert plain_counts[first] == plain_counts[second] == counts[second] > 0
        # a recompute in each backward of the 3 steps x 2 microbatches (a stage may also run a
        # forward outside the steps: at most one recompute per forward)
        assert 3 * 2 <= counts[first] - counts[second] <= counts[second], ranks
        assert losses == plain_losses


@pytest.mark.parametrize("parallel, key, accepted", [
    ({"activation_checkpointing": "yes"}, "parallel.activation_checkpointing", '"full" or "selective"'),
    ({"activation_checkpointing": 1}, "parallel.activation_checkpointing", "false, true"),
    ({"activation_checkpointing": "full", "checkpoint_blocks": -2}, "parallel.checkpoint_blocks", "int >= 0"),
    ({"checkpoint_blocks": 4}, "parallel.checkpoint_blocks", "activation_checkpointing is false"),
    # configs/dit-7b.toml lists its strategies: --set parallel.activation_checkpointing=true alone did nothing
    ({"activation_checkpointing": True, "strategies": ["fsdp"]}, "parallel.activation_checkpointing", 'has no "ac"'),
])
def test_bad_checkpointing_values_name_the_key_and_what_is_accepted(parallel, key, accepted):
    with pytest.raises(ConfigError) as err:
        from_dict({"parallel": parallel, "data": {"source": "synthetic"}})
    assert err.value.key == key and accepted in str(err.value)


def test_more_blocks_than_the_stage_has_is_an_error_naming_the_count():
    cfg = ParallelConfig(activation_checkpointing=True, checkpoint_blocks=5)
    with pytest.raises(ValueError, match="blocks = 5, but this model .* has 4 blocks"):
        parallelize_model(_deep_dit_cross(), cfg, ONE, torch.device("cpu"))


def test_the_planners_selective_count_is_what_the_real_block_saves_per_token():
    """ModelSpec.selective_widths (dit-cross: 13 widths of the hidden size per token) against the
    outputs of the ops the ``selective`` policy keeps in a real dit-cross block, per latent token
    (two sequence lengths, so that the text's k and v and the per-sample modulation drop out)."""
    model = family_model("dit-cross")
    block, inputs = model.blocks[0], {}
    block.register_forward_pre_hook(lambda _, args: inputs.__setitem__("args", args))
    saved = {}
    for size in (4, 8):
        x, t, cond, _ = family_batch("dit-cross", batch=2, size=size)
        with torch.no_grad():
            model(x, t, cond)
            with _SavedByPolicy() as count:
                block(*inputs["args"])
        tokens = inputs["args"][0].shape[0] * inputs["args"][0].shape[1]
        saved[tokens] = count.elements
    (t1, e1), (t2, e2) = sorted(saved.items())
    c = model.config
    measured = (e2 - e1) / (t2 - t1) / c.hidden
    spec = ModelSpec(name="tiny", params=1, layers=c.depth, hidden=c.hidden, heads=c.num_heads, seq_len=t2)
    split, whole = spec.selective_widths()
    # + the attentions' log-sum-exp (one value per head per token: 2 heads / 32 per attention)
    assert measured == pytest.approx(split + whole + spec.attentions_per_block / spec.head_dim, rel=1e-6)
    assert (split, whole) == (10, 3)
