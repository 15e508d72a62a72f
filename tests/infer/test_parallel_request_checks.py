"""A parallel request that cannot run is refused by ``setup_inference`` on every rank, before any
process group or forward: CFG-parallel with one guidance branch, cp-hybrid groups that do not deal
evenly to the ranks. Real 2-process gloo groups."""

from __future__ import annotations

import torch

import vfm_models
from tests.gloo import spawn
from tests.infer.tiny import tiny_dit, tiny_meta
from vfm_infer.distributed import setup_inference
from vfm_infer.pipeline import GenerationSpec, VideoPipeline


def _stdit_pipe() -> VideoPipeline:
    torch.manual_seed(0)
    model = vfm_models.get_family("stdit").create(in_channels=3, patch=(1, 2, 2), hidden=32, depth=1, num_heads=2,
                                                   text_dim=16)
    meta = {**tiny_meta("rectified-flow"), "family": "stdit", "tokenizer_options": {"patch": 1},
            "text_encoder": "hash", "text_encoder_options": {"dim": 16}, "latent_shape": [3, 4, 8, 8]}
    return VideoPipeline(model, meta)


def _refusals(rank: int, world: int) -> list[str]:
    """Each request's error on this rank, and how many forwards ran before it."""
    out = []
    for guidance in (1.0, 0.0):
        pipe = VideoPipeline(tiny_dit(), tiny_meta())
        prepared = pipe.prepare(GenerationSpec(steps=2, guidance=guidance), ["1"])
        try:
            setup_inference(pipe, prepared, cfg_parallel=True)
            out.append("accepted")
        except ValueError as exc:
            out.append(str(exc))
    # stdit, 3 frames of 2x4 pixels: grid (3, 1, 2); cp-hybrid deals its 3 frames (spatial attention)
    # to 2 ranks, and one branch (guidance 1) is a batch of 1: 3 groups cannot split in two
    pipe = _stdit_pipe()
    calls = []
    pipe.model.register_forward_hook(lambda *a: calls.append(1))
    prepared = pipe.prepare(GenerationSpec(steps=2, guidance=1.0, frames=3, size=(2, 4)), ["a blob"])
    try:
        setup_inference(pipe, prepared, cp_strategy="cp-hybrid")
        pipe.sample_latent(prepared, "a blob")
        out.append("accepted")
    except ValueError as exc:
        out.append(f"{exc} [after {len(calls)} forwards]")
    return out


def test_a_parallel_request_that_cannot_run_is_refused_on_every_rank_before_any_forward():
    ranks = spawn(_refusals, 2)
    assert ranks[0] == ranks[1]  # the same refusal on every rank, none left waiting in a collective
    at_one, at_zero, hybrid = ranks[0]
    assert at_one.startswith("CFG-parallel runs the conditional and unconditional branches on two ranks, but at "
                             "guidance 1 (also the default of an export trained without condition dropout) only the "
                             "conditional one runs")
    assert "at guidance 0 only the unconditional one runs" in at_zero and "leave out --cfg-parallel" in at_zero
    assert hybrid.startswith("spatial attention by all-to-all deals whole groups to cp=2 ranks, but neither the "
                             "frames t = 3 of grid (3, 1, 2)")
    assert hybrid.endswith("[after 0 forwards]")
