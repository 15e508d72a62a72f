"""Context-parallel (and CFG-parallel) generation equals one process for every model family and each
CP strategy it runs under: ring and all-to-all (Ulysses) for dit, dit-cross, stdit and moviegen, the
hybrid (all-to-all groups for spatial/temporal attention) where it differs, on 2 real gloo ranks.

Tolerance: fp32 latents within 1e-5. Measured: Ulysses is bit-identical (each rank attends over the
whole sequence for its heads); ring and hybrid differ by at most 7.2e-7 on latents of size ~4 (the
online-softmax merge of K/V blocks adds in another order), so 1e-5 leaves ~15x headroom while a
dropped or misplaced K/V block moves the latent by 1e-1 or more."""

from __future__ import annotations

import torch

import vfm_models
from tests.gloo import spawn
from vfm_infer.distributed import setup_inference
from vfm_infer.pipeline import GenerationSpec, VideoPipeline

#: family -> its conditioning options; text families take the registered ``hash`` encoder's 16-wide text
FAMILIES = {"dit": {"num_classes": 4}, "dit-cross": {"text_dim": 16}, "stdit": {"text_dim": 16},
            "moviegen": {"text_dim": 16}}
#: (family, strategy, cfg-parallel) runs; cp-hybrid only differs from cp-ring where attention is
#: spatial or temporal (stdit)
RUNS = [(f, s, False) for f in FAMILIES for s in ("cp-ring", "cp-ulysses")] + [
    ("stdit", "cp-hybrid", False), ("dit-cross", "cp-ring", True)]
SPEC = GenerationSpec(steps=4, guidance=4.0, seed=3)


def _pipe(family: str) -> VideoPipeline:
    torch.manual_seed(0)
    model = vfm_models.get_family(family).create(in_channels=3, patch=(1, 2, 2), hidden=32, depth=2, num_heads=4,
                                                  **FAMILIES[family])
    with torch.no_grad():  # adaLN-Zero starts at zero: give every weight a say in the output
        for p in model.parameters():
            if p.abs().sum() == 0:
                p.normal_(0, 0.05)
    text = "text_dim" in FAMILIES[family]
    meta = {"family": family, "formulation": "rectified-flow",
            "formulation_options": vfm_models.get_formulation("rectified-flow")().options(),
            "tokenizer": "pixel", "tokenizer_options": {"patch": 1}, "latent_shape": [3, 4, 8, 8],
            "text_encoder": "hash" if text else None, "text_encoder_options": {"dim": 16} if text else {}}
    return VideoPipeline(model, meta)


def _prompt(family: str) -> str:
    return "a red blob moving left" if "text_dim" in FAMILIES[family] else "1"


def _latent(pipe: VideoPipeline, family: str) -> torch.Tensor:
    prompt = _prompt(family)
    return pipe.sample_latent(pipe.prepare(SPEC, [prompt]), prompt)


def _parallel_latents(rank: int, world: int) -> list[torch.Tensor]:
    out = []
    for family, strategy, cfg in RUNS:
        pipe = _pipe(family)
        prepared = pipe.prepare(SPEC, [_prompt(family)])
        if cfg:  # CFG-parallel over the 2 ranks (each rank one guidance branch, the whole sequence)
            setup_inference(pipe, prepared, cfg_parallel=True)
        else:
            setup_inference(pipe, prepared, cp_strategy=strategy)
        out.append(pipe.sample_latent(prepared, _prompt(family)))
    return out


def test_every_family_generates_the_one_process_latent_under_each_cp_strategy():
    expected = {f: _latent(_pipe(f), f) for f in FAMILIES}
    ranks = spawn(_parallel_latents, 2)
    for i, (family, strategy, cfg) in enumerate(RUNS):
        assert torch.equal(ranks[0][i], ranks[1][i]), (family, strategy, cfg)  # every rank steps the same latent
        torch.testing.assert_close(ranks[0][i], expected[family], rtol=1e-5, atol=1e-5,
                                   msg=lambda m: f"{family} {strategy} cfg-parallel={cfg}: {m}")
