"""Guidance scale 0 is the unconditional prediction: one forward of the unconditional branch per
evaluation, not a batch of two whose conditional half is multiplied by 0."""

from __future__ import annotations

import torch

from vfm_infer.guidance import classifier_free
from vfm_infer.pipeline import GenerationSpec, VideoPipeline
from tests.infer.tiny import tiny_dit, tiny_meta


def test_scale_zero_runs_only_the_unconditional_branch():
    seen = []

    def net(x, level, cond):
        seen.append((x.shape[0], cond["y"].tolist()))
        return x * cond["y"].view(-1, 1).float()

    x, level = torch.ones(1, 2), torch.ones(1)
    out = classifier_free(net, {"y": torch.tensor([3])}, {"y": torch.tensor([5])}, 0.0)(x, level)
    assert seen == [(1, [5])]
    torch.testing.assert_close(out, x * 5)


def test_a_video_at_guidance_zero_runs_one_forward_of_the_unconditional_branch_per_evaluation():
    model = tiny_dit()
    batches = []
    model.register_forward_hook(lambda m, args, out: batches.append(args[0].shape[0]))
    pipe = VideoPipeline(model, tiny_meta(null_condition={"kind": "class", "label": 4}))
    spec = GenerationSpec(steps=2, sampler="edm-euler", guidance=0.0, seed=3)
    unguided = pipe.generate("1", spec)
    assert set(batches) == {1}
    negative = pipe.generate("1", GenerationSpec(steps=2, sampler="edm-euler", guidance=0.0, seed=3, negative_prompt="2"))
    assert not torch.equal(unguided, negative)  # the unconditional branch is the one that runs
