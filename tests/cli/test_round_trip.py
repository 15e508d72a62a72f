"""Train, export, sample: a tiny class-conditional DiT learns one constant colour field per class in
seconds, and every registered sampler, with and without guidance, for both formulations, draws
videos whose mean colour is their class's. The test that an untrained null condition, a broken
export or a sampler that does not match its formulation's training would fail."""

from __future__ import annotations

import pytest
import torch

import vfm_models
from vfm_cli import recipe
from vfm_cli.recipe.export import exporter, null_cond
from vfm_infer.pipeline import GenerationSpec, VideoPipeline
from vfm_infer.plugins import host
from vfm_parallel.trainer import TrainParts, from_dict, train
from vfm_parallel.trainer.synthetic import SyntheticLoader

#: class k's colour (C = 3: the pixel tokenizer at patch 1 makes latents equal to pixels)
COLOURS = torch.tensor([[0.7, -0.6, -0.5], [-0.6, 0.6, -0.4], [-0.5, -0.3, 0.7], [0.6, 0.5, -0.6]])
SHAPE = (3, 1, 4, 4)  # (C, T, H, W): 4 tokens with patch (1, 2, 2)
JITTER = 0.1  # each sample's brightness offset, uniform in [-JITTER, JITTER]: a class is a small family
TOLERANCE = 0.2  # per channel, on the mean colour
FORMULATIONS = {"edm": {"P_mean": 0.0, "P_std": 1.5}, "rectified-flow": {"shift": 2.0}}
CASES = sorted((f, s) for s in host.names("samplers") for f in FORMULATIONS
               if getattr(host.get("samplers", s), "formulation", None) == f)


def colour_fields(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % len(COLOURS)
    offset = (torch.rand(n, 1, generator=g) * 2 - 1) * JITTER
    colours = COLOURS[labels] + offset  # (n, 3)
    return colours[:, :, None, None, None].expand(n, *SHAPE).contiguous(), labels


def _config(tmp_path, formulation: str) -> dict:
    return {
        "model": {"family": "dit", "formulation": formulation, "formulation_options": FORMULATIONS[formulation],
                  "tokenizer": "pixel", "tokenizer_options": {"patch": 1},
                  "options": {"in_channels": 3, "patch": [1, 2, 2], "hidden": 32, "depth": 2, "num_heads": 2}},
        "data": {"source": "synthetic", "micro_batch": 16, "latent_shape": list(SHAPE), "num_classes": len(COLOURS)},
        "optim": {"lr": 1e-2, "warmup_steps": 10},
        "train": {"steps": 400, "seed": 0, "out_dir": str(tmp_path), "cond_dropout": 0.2},
        "ema": {"enabled": True, "decay": 0.95},
        "checkpoint": {"interval": 0, "export": True},
        "logging": {"interval": 100, "tensorboard": False, "loss_curve": False, "progress": False, "peak_tflops": 1.0},
    }


def _build(ctx) -> TrainParts:
    """the recipe's parts (model, formulation, export, null condition) with colour fields as the data."""
    cfg = ctx.config
    r = recipe.resolve(cfg)
    model = vfm_models.get_family(cfg.model.family).build(r.mcfg)
    formulation = vfm_models.get_formulation(cfg.model.formulation)(**cfg.model.formulation_options)
    latents, labels = colour_fields(64)
    return TrainParts(model=model, formulation=formulation, flops_per_token=1.0,
                      loader=SyntheticLoader(latents, labels, cfg.data.micro_batch),
                      export=exporter(cfg, r, formulation), null_cond=null_cond(cfg, r))


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """formulation -> the export of a run trained with it (each trained once, when first asked for)."""
    done: dict[str, object] = {}

    def get(formulation: str):
        if formulation not in done:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)  # a 4-token model: threads only add overhead
            try:
                cfg = from_dict(_config(tmp_path_factory.mktemp(formulation), formulation), 1)
                done[formulation] = train(cfg, _build).export
            finally:
                torch.set_num_threads(threads)
        return done[formulation]

    return get


def _mean_colours(pipe: VideoPipeline, sampler: str, guidance: float | None, seeds=(0, 1)) -> torch.Tensor:
    """(classes, seeds, 3): the mean colour of each sampled video."""
    out = []
    for k in range(len(COLOURS)):
        row = []
        for seed in seeds:
            video = pipe.generate(str(k), GenerationSpec(sampler=sampler, steps=12, guidance=guidance, seed=seed))
            row.append(video.flatten(1).mean(1))
        out.append(torch.stack(row))
    return torch.stack(out)


def _assert_on_the_data(means: torch.Tensor, what: str) -> None:
    err = (means - COLOURS[:, None, :]).abs()
    assert err.max() < TOLERANCE + JITTER, f"{what}: mean colours {means.tolist()} are off their classes by up to {err.max():.3f}"


@pytest.mark.parametrize(("formulation", "sampler"), CASES, ids=[f"{f}-{s}" for f, s in CASES])
def test_samples_land_on_their_class_colour_with_and_without_guidance(exports, formulation, sampler):
    pipe = VideoPipeline.from_export(exports(formulation))
    assert pipe.meta["guidance"] == vfm_models.get_formulation(formulation).default_guidance > 1
    _assert_on_the_data(_mean_colours(pipe, sampler, 1.0), f"{sampler} unguided")
    _assert_on_the_data(_mean_colours(pipe, sampler, None), f"{sampler} with the export's guidance")


@pytest.mark.parametrize("formulation", sorted(FORMULATIONS))
def test_a_guided_sample_differs_from_the_unguided_one_and_both_stay_on_the_data(exports, formulation):
    pipe = VideoPipeline.from_export(exports(formulation))
    plain = _mean_colours(pipe, None, 1.0)
    guided = _mean_colours(pipe, None, 3.0)
    _assert_on_the_data(plain, "unguided")
    _assert_on_the_data(guided, "guidance 3")
    assert (guided - plain).abs().max() > 0.01


def test_the_export_records_the_null_condition_it_was_trained_with(exports):
    meta = VideoPipeline.from_export(exports("edm")).meta
    assert meta["null_condition"] == {"kind": "class", "label": len(COLOURS)}
    assert meta["cond_dropout"] == 0.2
