"""``GenerationSpec.sampler_options``: a name the sampler does not take, or a value of the wrong type,
is a ValueError naming the sampler's options (not the constructor's TypeError)."""

from __future__ import annotations

import pytest

from vfm_infer.pipeline import GenerationSpec, VideoPipeline
from tests.infer.tiny import tiny_dit, tiny_meta


@pytest.mark.parametrize(
    ("formulation", "sampler", "options", "message"),
    [
        ("edm", "edm-heun", {"shift": 3.0}, "sampler 'edm-heun' has no option shift; its options: sigma_min, sigma_max"),
        ("rectified-flow", "flow-euler", {"steps": 3}, "sampler 'flow-euler' has no option steps (set by the steps"),
        ("edm", "edm-heun", {"churn": "lots"}, "sampler 'edm-heun' cannot take the options churn='lots'"),
    ],
)
def test_a_sampler_option_the_sampler_cannot_take_is_a_value_error_naming_its_options(formulation, sampler, options,
                                                                                        message):
    pipe = VideoPipeline(tiny_dit(), tiny_meta(formulation))
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        pipe.prepare(GenerationSpec(sampler=sampler, steps=2, sampler_options=options), ["1"])

