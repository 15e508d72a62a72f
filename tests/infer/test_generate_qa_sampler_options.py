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


@pytest.mark.parametrize(
    ("formulation", "sampler", "options", "message"),
    [
        ("rectified-flow", "flow-euler", {"shift": float("nan")}, "shift must be a finite number > 0"),
        ("rectified-flow", "flow-heun", {"shift": float("inf")}, "shift must be a finite number > 0"),
        ("edm", "edm-heun", {"sigma_max": float("inf")}, "need 0 < sigma_min < sigma_max, both finite"),
        ("edm", "dpm-solver++", {"sigma_max": float("inf")}, "need 0 < sigma_min < sigma_max, both finite"),
        ("edm", "edm-heun", {"churn": float("nan")}, "churn must be a finite number >= 0"),
        ("edm", "edm-euler", {"churn": 10.0, "churn_noise": float("nan")}, "churn_noise must be a finite number >= 0"),
        ("edm", "edm-euler", {"churn": 10.0, "churn_min": float("nan")}, "need 0 <= churn_min <= churn_max"),
        ("edm", "edm-euler", {"rho": float("nan")}, "rho must be a finite number > 0"),
        ("edm", "dpm-solver++", {"rho": float("inf")}, "rho must be a finite number > 0"),
    ],
)
def test_a_non_finite_sampler_option_is_refused_before_any_denoising(formulation, sampler, options, message):
    """inf or nan in a schedule option used to run every step and then fail on a nan latent (or, as
    churn, be read as "off" without a word)."""
    calls = []
    model = tiny_dit()
    model.register_forward_hook(lambda *args: calls.append(1))
    pipe = VideoPipeline(model, tiny_meta(formulation))
    with pytest.raises(ValueError, match=message):
        pipe.prepare(GenerationSpec(sampler=sampler, steps=2, sampler_options=options), ["1"])
    assert calls == []
