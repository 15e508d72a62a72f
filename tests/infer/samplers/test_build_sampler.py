"""``build_sampler`` reads which options a sampler takes with vfm_plugins.unknown_options, the check
every plugin kind's options go through: named options, ``**kwargs``, and ``steps`` kept for the request."""

from __future__ import annotations

import pytest

from vfm_infer.samplers.base import build_sampler


class Named:
    def __init__(self, steps, *, sigma_max=80.0, churn=0.0):
        self.steps, self.sigma_max, self.churn = steps, sigma_max, churn


class TakesAny:
    def __init__(self, steps, **options):
        self.steps, self.options = steps, options


def test_formulation_defaults_reach_a_sampler_only_where_it_takes_them():
    named = build_sampler("named", Named, 4, {"sigma_max": 10.0, "rho": 7.0}, {"churn": 0.5})
    assert (named.steps, named.sigma_max, named.churn) == (4, 10.0, 0.5)
    anything = build_sampler("any", TakesAny, 4, {"sigma_max": 10.0, "rho": 7.0}, {"churn": 0.5})
    assert anything.options == {"sigma_max": 10.0, "rho": 7.0, "churn": 0.5}


def test_an_option_the_sampler_does_not_take_is_a_value_error_listing_the_options_it_takes():
    with pytest.raises(ValueError, match=r"^sampler 'named' has no option steps \(set by the steps of the request\), "
                                         r"bogus; its options: sigma_max, churn$"):
        build_sampler("named", Named, 4, {}, {"bogus": 1, "steps": 3})


class NamesItself:
    """A plugin sampler whose own range check already names it, as the built-in errors read."""

    def __init__(self, steps, *, gain: float = 1.0):
        if gain < 0:
            raise ValueError(f"sampler 'named-itself': gain must be >= 0, got {gain}")
        self.steps = steps


def test_a_plugin_sampler_s_own_error_that_names_it_is_not_prefixed_with_its_name_again():
    with pytest.raises(ValueError) as info:
        build_sampler("named-itself", NamesItself, 4, {}, {"gain": -1})
    assert str(info.value) == "sampler 'named-itself': gain must be >= 0, got -1"

