"""Training health: non-finite settings are refused at validation, a non-finite loss or gradient
norm skips the step on every rank (weights, EMA and optimizer state untouched) and
``train.max_nonfinite_steps`` such steps in a row stop the run, naming the steps, before anything
is exported."""

from __future__ import annotations

import os

import pytest
import torch

from tests.gloo import spawn
from tests.parallel.trainer_helpers import build_parts, tiny_config
from vfm_parallel.trainer import ConfigError, TrainParts, from_dict, train
from vfm_parallel.trainer import NonFiniteTrainingError
from vfm_parallel.trainer.saving import full_weights


@pytest.mark.parametrize(
    "section, values, key",
    [
        ("optim", {"lr": float("inf")}, "optim.lr"),
        ("optim", {"eps": float("nan")}, "optim.eps"),
        ("optim", {"weight_decay": float("inf")}, "optim.weight_decay"),
        ("optim", {"betas": [0.9, float("nan")]}, "optim.betas"),
        ("optim", {"grad_clip": float("inf")}, "optim.grad_clip"),
        ("ema", {"decay": float("nan")}, "ema.decay"),
        ("train", {"cond_dropout": float("nan")}, "train.cond_dropout"),
        ("logging", {"peak_tflops": float("inf")}, "logging.peak_tflops"),
        ("model", {"formulation_options": {"sigma_data": float("inf")}}, "model.formulation_options.sigma_data"),
        ("model", {"options": {"mlp_ratio": float("nan")}}, "model.options.mlp_ratio"),
    ],
)
def test_a_non_finite_setting_is_refused_at_validation_naming_its_key(tmp_path, section, values, key):
    with pytest.raises(ConfigError) as info:
        from_dict(tiny_config(tmp_path, **{section: values}))
    assert info.value.key == key
    assert "must be a finite number" in str(info.value)


class _Poisoned:
    """The synthetic loader with chosen batches (1-based, in the order drawn) made non-finite."""

    def __init__(self, loader, bad: set[int], value: float = float("nan")) -> None:
        self.loader, self.bad, self.value = loader, bad, value

    def __iter__(self):
        for n, batch in enumerate(self.loader, start=1):
            keys = [f"batch{n}-sample{i}" for i in range(batch["x0"].shape[0])]  # as vfm-data's batches carry them
            if n in self.bad:
                batch = {**batch, "x0": torch.full_like(batch["x0"], self.value)}
            yield {**batch, "keys": keys}

    def state_dict(self):
        return self.loader.state_dict()

    def load_state_dict(self, state):
        self.loader.load_state_dict(state)


def _poisoned_parts(bad: set[int], value: float = float("nan"), ranks: tuple[int, ...] = (0,), exported: list | None = None):
    """The tiny run's parts with ``bad`` batches non-finite on the given ranks, and an export that
    records what it was asked to write."""

    def build(ctx) -> TrainParts:
        parts = build_parts(ctx)
        if ctx.coords.rank in ranks:
            parts.loader = _Poisoned(parts.loader, bad, value)
        if exported is not None:
            parts.export = lambda folder, weights: exported.append(folder)
        return parts

    return build


def _state(result) -> dict:
    """The full weights a run ended with (CPU copies)."""
    return full_weights(result.model.named_parameters())


def _checkpoint_tensors(result) -> dict:
    """Every tensor of the run's last checkpoint: weights, EMA, AdamW's moments and step count."""
    from safetensors.torch import load_file

    return {k: v for f in sorted((result.checkpoint / "tensors").glob("*.safetensors")) for k, v in load_file(f).items()}


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


#: Where a skip happens: on the host (AdamW's foreach path: one sync per step) or on the device
#: (fused AdamW's found_inf, reviewed at the logging interval: here every 4 steps, so the review
#: comes steps after the skip it reports).
SKIP_PATHS = {"host": {"optim": {"fused": "off"}}, "device": {"optim": {"fused": "on"}, "logging": {"interval": 4}}}


def _paths(name: str) -> dict:
    return SKIP_PATHS[name]


@pytest.mark.parametrize("path", SKIP_PATHS)
def test_all_infinite_latents_stop_the_run_naming_the_steps_and_export_nothing(tmp_path, path):
    exported: list = []
    data = tiny_config(tmp_path, train={"steps": 6}, checkpoint={"export": True}, **_paths(path))
    with pytest.raises(NonFiniteTrainingError) as info:
        train(from_dict(data), _poisoned_parts(set(range(1, 100)), float("inf"), exported=exported))
    message = str(info.value)
    assert "steps 1, 2, 3" in message and "train.max_nonfinite_steps = 3" in message
    assert "samples: rank 0: batch3-sample0, batch3-sample1" in message
    assert exported == [] and not (tmp_path / "export").exists()
    assert not (tmp_path / "checkpoints").exists() or not any((tmp_path / "checkpoints").iterdir())


@pytest.mark.parametrize("path", SKIP_PATHS)
def test_max_nonfinite_steps_sets_how_many_in_a_row_stop_the_run(tmp_path, path):
    data = tiny_config(tmp_path, train={"steps": 6, "max_nonfinite_steps": 1}, **_paths(path))
    with pytest.raises(NonFiniteTrainingError, match=r"step 2 had a non-finite loss"):
        train(from_dict(data), _poisoned_parts({2}))


@pytest.mark.parametrize("path", SKIP_PATHS)
def test_a_single_nan_step_is_skipped_and_training_recovers(tmp_path, path):
    # Reference: the first two steps of the clean run.
    clean = train(from_dict(tiny_config(tmp_path / "clean", train={"steps": 6, "stop_at": 2}, **_paths(path))), build_parts)
    # Step 3's batch is NaN: after step 3, weights, EMA and AdamW's moments and step count are step 2's.
    with pytest.warns(RuntimeWarning, match=r"step 3 skipped: non-finite loss nan"):
        skipped = train(from_dict(tiny_config(tmp_path / "skip", train={"steps": 6, "stop_at": 3}, **_paths(path))),
                        _poisoned_parts({3}))
    assert _same(_checkpoint_tensors(clean), _checkpoint_tensors(skipped))
    assert skipped.losses[3] != skipped.losses[3]  # NaN, logged as it was
    # And the run goes on: the later steps train on finite losses.
    later = train(from_dict(tiny_config(tmp_path / "later", train={"steps": 6}, **_paths(path))), _poisoned_parts({3}))
    assert all(later.losses[s] == later.losses[s] for s in (4, 5, 6))
    assert all(torch.isfinite(w).all() for w in _state(later).values())
    assert not _same(_state(later), _state(skipped))


#: Two-rank layouts the skip is checked under: FSDP (the default), TP and PP, each on the host path
#: and on the device path (fused AdamW: DTensor parameters under FSDP, DTensors beside plain
#: replicated ones under TP, plain under PP).
LAYOUTS = {f"{name}-{path}": (layout, path) for path in SKIP_PATHS
           for name, layout in {"fsdp": {}, "tp": {"tp": 2, "dp_shard": 1}, "pp": {"pp": 2, "dp_shard": 1}}.items()}


def _two_ranks(rank, world, root):
    """Under each layout, rank 1 alone sees a NaN batch at step 2: both ranks skip it (weights
    after step 2 = after step 1). Then rank 1 alone sees only infinite batches: both ranks stop."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))

    def cfg(name, layout, path="host", **train_):
        return from_dict(tiny_config(root / name, parallel=layout, train={"steps": 4, **train_}, **_paths(path)), world)

    out = {}
    for name, (layout, path) in LAYOUTS.items():
        one = train(cfg(f"{name}-one", layout, path, stop_at=1), build_parts)
        two = train(cfg(f"{name}-two", layout, path, stop_at=2), _poisoned_parts({2}, ranks=(1,)))
        out[name] = {"equal": _same(_state(one), _state(two)), "loss2": two.losses[2]}
    try:
        train(cfg("stop", {}), _poisoned_parts(set(range(1, 100)), float("inf"), ranks=(1,)))
        out["error"] = None
    except NonFiniteTrainingError as exc:
        out["error"] = str(exc)
    return out


def test_ranks_agree_to_skip_a_step_that_one_rank_saw_as_nan_and_stop_together(tmp_path):
    results = spawn(_two_ranks, 2, tmp_path)
    for name in LAYOUTS:
        assert all(r[name]["equal"] for r in results), name
        assert all(r[name]["loss2"] != r[name]["loss2"] for r in results), name  # NaN, logged as it was
    # Named on both ranks: the steps, and the samples of the rank whose loss was not finite.
    assert all(r["error"] and "steps 1, 2, 3" in r["error"] and "samples: rank 1: batch3-sample0" in r["error"] for r in results)
