"""``GenerationSpec.sampler_options``: a name the sampler does not take, or a value of the wrong type,
is a ValueError naming the sampler's options (not the constructor's TypeError)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import pytest

from vfm_infer.pipeline import GenerationSpec, VideoPipeline
from tests.infer.tiny import tiny_dit, tiny_meta


@pytest.mark.parametrize(
    ("formulation", "sampler", "options", "message"),
    [
        ("edm", "edm-heun", {"shift": 3.0}, "sampler 'edm-heun' has no option shift; its options: sigma_min, sigma_max"),
        ("rectified-flow", "flow-euler", {"steps": 3}, "sampler 'flow-euler' has no option steps (set by the steps"),
        ("edm", "edm-heun", {"churn": "lots"}, "sampler 'edm-heun': churn takes a number (default 0.0), got 'lots' (a string)"),
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


@pytest.mark.parametrize(
    ("formulation", "sampler", "options", "message"),
    [
        ("edm", "edm-heun", {"churn": "abc"}, "sampler 'edm-heun': churn takes a number (default 0.0), got 'abc' (a string)"),
        # a bool is an int to Python: churn=true ran as churn 1, eta=true as eta 1, without a word
        ("edm", "edm-euler", {"churn": True}, "sampler 'edm-euler': churn takes a number (default 0.0), got True (true/false)"),
        ("ddpm", "ddim", {"eta": True}, "sampler 'ddim': eta takes a number (default 0.0), got True (true/false)"),
        ("ddpm", "ddim", {"steps_offset": 1.5}, "sampler 'ddim': steps_offset takes an integer (default 0), got 1.5 (a number)"),
        ("ddpm", "ddim", {"timestep_spacing": 3}, "sampler 'ddim': timestep_spacing takes a string, got 3 (an integer)"),
        ("rectified-flow", "flow-heun", {"shift": [1, 2]}, "sampler 'flow-heun': shift takes a number (default 1.0), got [1, 2] (a list)"),
        ("edm", "dpm-solver++", {"rho": "7", "sigma_max": "80"},
         "sampler 'dpm-solver++': rho takes a number (default 7.0), got '7' (a string); sigma_max takes a number"),
    ],
)
def test_a_sampler_option_of_the_wrong_type_names_the_option_the_value_and_the_type_taken(formulation, sampler, options,
                                                                                          message):
    pipe = VideoPipeline(tiny_dit(), tiny_meta(formulation))
    with pytest.raises(ValueError) as info:
        pipe.prepare(GenerationSpec(sampler=sampler, steps=2, sampler_options=options), ["1"])
    assert message in str(info.value)


def test_a_sampler_option_of_the_right_type_still_builds_the_sampler():
    import numpy as np

    # an integer is a number (churn=40 on the command line), a numpy scalar too
    for options in ({"churn": 40}, {"churn": np.float32(2.5)}, {"churn": np.int64(3), "rho": 7}):
        prepared = VideoPipeline(tiny_dit(), tiny_meta("edm")).prepare(
            GenerationSpec(sampler="edm-euler", steps=2, sampler_options=options), ["1"])
        assert prepared.sampler.churn == options["churn"]


def test_a_sampler_option_out_of_range_names_the_sampler():
    pipe = VideoPipeline(tiny_dit(), tiny_meta("edm"))
    with pytest.raises(ValueError, match=r"^sampler 'edm-heun': churn must be a finite number >= 0"):
        pipe.prepare(GenerationSpec(sampler="edm-heun", steps=2, sampler_options={"churn": -1}), ["1"])


if TYPE_CHECKING:
    from pathlib import Path  # resolvable only by a type checker, as in a plugin


def test_a_plugin_sampler_s_literal_and_bool_options_are_checked_from_its_annotations():
    from vfm_infer.samplers.base import build_sampler
    from vfm_infer.samplers.flow import FlowEuler

    class Plugin(FlowEuler):
        def __init__(self, steps: int = 32, *, shift: float = 1.0, mode: Literal["fast", "exact"] = "fast",
                     clip: bool = False, extra=None, cache: Path | None = None) -> None:
            super().__init__(steps, shift=shift)
            self.mode, self.clip = mode, clip

    with pytest.raises(ValueError) as info:
        build_sampler("plugin", Plugin, 2, {}, {"mode": "slow", "clip": 1})
    assert str(info.value) == ("sampler 'plugin': mode takes one of 'fast', 'exact' (default 'fast'), got 'slow' (a string); "
                               "clip takes true or false (default False), got 1 (an integer)")
    built = build_sampler("plugin", Plugin, 2, {}, {"mode": "exact", "clip": True, "extra": "anything", "cache": 3})
    # an option without annotation, or whose annotation cannot be resolved, is the constructor's to judge
    assert (built.mode, built.clip) == ("exact", True)


def test_a_wrongly_typed_option_names_the_exports_schedule_value_as_its_default_not_the_samplers_own():
    """An export trained with shift 3 samples at shift 3 without the option; ``shift=abc`` was told
    "(default 1.0)", the constructor's, which this export never runs with."""
    meta = tiny_meta("rectified-flow")
    meta["formulation_options"] = {**meta["formulation_options"], "shift": 3.0}
    pipe = VideoPipeline(tiny_dit(), meta)
    assert pipe.prepare(GenerationSpec(sampler="flow-euler", steps=2), ["1"]).sampler.shift == 3.0
    with pytest.raises(ValueError) as caught:
        pipe.prepare(GenerationSpec(sampler="flow-euler", steps=2, sampler_options={"shift": "abc"}), ["1"])
    assert str(caught.value) == ("sampler 'flow-euler': shift takes a number (default here 3.0, the export's; the "
                                 "sampler's own 1.0), got 'abc' (a string)")
