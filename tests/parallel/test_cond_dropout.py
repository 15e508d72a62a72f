"""Condition dropout in the trainer: drawn from its own named stream, it trains the null condition
and a resumed run drops exactly the samples a straight run drops."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.parallel import trainer_helpers
from tests.parallel.trainer_helpers import one_thread  # noqa: F401 (autouse: one CPU thread per test)
from tests.parallel.trainer_helpers import tiny_config
from vfm_models.conditioning import with_null
from vfm_parallel.trainer import batches, from_dict, train
from vfm_parallel.trainer.config import ConfigError
from vfm_parallel.trainer.ema import clean_fqn
from vfm_parallel.trainer.streams import cond_dropout_generator


CLASSES = 4
SEEN: list[torch.Tensor] = []  # the labels of every micro-batch the model was given


def _build_with_null(ctx):
    parts = trainer_helpers.build_parts(ctx)
    null = {"y": torch.tensor([CLASSES])}

    def null_cond(cond, drop):
        out = with_null(cond, null, drop)
        SEEN.append(out["y"].clone())
        return out

    return dataclasses.replace(parts, null_cond=null_cond)


def _run(cfg: dict):
    return train(from_dict(cfg, 1), _build_with_null)


def _null_row_grad_norms(cfg: dict) -> float:
    """Sum over steps of the null class row's gradient norm in the label table."""
    norms = []

    def build(ctx):
        parts = _build_with_null(ctx)
        table = parts.model.y_embedder.table.weight
        table.register_hook(lambda g: norms.append(float(g[CLASSES].norm())))
        return parts

    train(from_dict(cfg, 1), build)
    return sum(norms)


def test_the_null_class_row_receives_gradient_only_with_cond_dropout(tmp_path):
    on = _null_row_grad_norms(tiny_config(tmp_path / "on", train={"steps": 8, "cond_dropout": 0.5}))
    off = _null_row_grad_norms(tiny_config(tmp_path / "off", train={"steps": 8, "cond_dropout": 0.0}))
    assert on > 0
    assert off == 0


def test_cond_dropout_replaces_about_p_of_the_labels_by_the_null_class(tmp_path):
    SEEN.clear()
    _run(tiny_config(tmp_path, train={"steps": 100, "cond_dropout": 0.3}))
    labels = torch.cat(SEEN)
    assert len(labels) == 200
    assert 0.2 < (labels == CLASSES).float().mean() < 0.4


def test_cond_dropout_is_the_same_in_a_resumed_run_as_in_a_straight_one(tmp_path):
    SEEN.clear()
    straight = _run(tiny_config(tmp_path / "a", train={"steps": 8, "cond_dropout": 0.5}))
    straight_labels = torch.cat(SEEN)
    SEEN.clear()
    split = tiny_config(tmp_path / "b", train={"steps": 8, "stop_at": 4, "cond_dropout": 0.5})
    _run(split)
    split["train"]["stop_at"] = 0
    resumed = _run(split)
    assert resumed.start_step == 4
    assert torch.equal(torch.cat(SEEN), straight_labels)
    assert (straight_labels == CLASSES).any() and (straight_labels != CLASSES).any()
    assert resumed.losses == {k: v for k, v in straight.losses.items() if k > 4}
    a = {clean_fqn(k): v for k, v in straight.model.named_parameters()}
    b = {clean_fqn(k): v for k, v in resumed.model.named_parameters()}
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_the_dropout_stream_differs_across_data_parallel_batches_and_steps_only():
    def draws(step, micro):
        return torch.rand(64, generator=cond_dropout_generator(3, step, micro))

    assert torch.equal(draws(5, 1), draws(5, 1))  # a pure function of (seed, step, global micro-batch)
    assert not torch.equal(draws(5, 1), draws(5, 2))
    assert not torch.equal(draws(5, 1), draws(6, 1))
    from vfm_parallel import rng

    assert rng.STREAMS["cond_dropout"] == rng.STREAMS["timestep"]  # the same on CP, TP and PP ranks


def test_drop_conditions_leaves_the_batch_alone_without_a_null_or_at_zero():
    batch = {"x0": torch.zeros(3, 1, 1, 1, 1), "cond": {"y": torch.tensor([0, 1, 2])}}
    gen = torch.Generator().manual_seed(0)
    assert batches.drop_conditions(batch, None, 0.5, gen) is batch
    assert batches.drop_conditions(batch, lambda c, d: {}, 0.0, gen) is batch
    dropped = batches.drop_conditions(batch, lambda c, d: {"y": torch.where(d, 9, c["y"])}, 0.999, gen)
    assert dropped["cond"]["y"].tolist() == [9, 9, 9] and batch["cond"]["y"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("value", [-0.1, 1.0])
def test_cond_dropout_outside_zero_to_one_is_a_config_error(tmp_path, value):
    with pytest.raises(ConfigError, match="train.cond_dropout"):
        from_dict(tiny_config(tmp_path, train={"cond_dropout": value}))
