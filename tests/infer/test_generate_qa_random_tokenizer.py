"""An export whose tokenizer has no weights (causal3d at random init, as in tiny runs) decodes with
the same tokenizer every time, the one the sharding pipeline encoded the training latents with."""

from __future__ import annotations

import torch

from vfm_curator.stages.shard_tokenize import build_tokenizer
from vfm_infer.pipeline import GenerationSpec, VideoPipeline
from tests.infer.tiny import tiny_dit, tiny_meta

CAUSAL3D = {"latent_channels": 4, "base_channels": 8, "temporal_compression": 4, "spatial_compression": 4}


def _pipeline(global_seed: int) -> VideoPipeline:
    model = tiny_dit(in_channels=4)
    meta = tiny_meta(tokenizer="causal3d", tokenizer_options=CAUSAL3D, latent_shape=[4, 2, 4, 4])
    torch.manual_seed(global_seed)  # whatever the process drew before must not pick the tokenizer
    return VideoPipeline(model, meta)


def test_same_seed_gives_the_same_video_with_a_tokenizer_without_weights():
    spec = GenerationSpec(steps=2, guidance=1.0, seed=5)
    a, b = _pipeline(1).generate("1", spec), _pipeline(2).generate("1", spec)
    assert a.shape == (3, 5, 16, 16)
    assert torch.equal(a, b)


def test_a_tokenizer_without_weights_is_the_one_sharding_builds():
    pipe, sharded = _pipeline(3), build_tokenizer("causal3d", CAUSAL3D)
    ours, theirs = pipe.tokenizer.state_dict(), sharded.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)
