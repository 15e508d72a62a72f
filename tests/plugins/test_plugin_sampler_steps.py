"""A plugin sampler whose constructor calls the step count otherwise (``n_steps``) gets it as every sampler
does (first positional argument), and ``--sampler-option n_steps=2`` is refused as the step count, like
``steps=2`` for a built-in (it was "cannot take the options n_steps=2: ... got multiple values")."""

from __future__ import annotations

import pytest

SAMPLER = """
    from vfm_infer.plugins import hookimpl
    from vfm_infer.samplers import Sampler
    from vfm_infer.samplers.flow import shifted_levels


    class StepsByAnotherName(Sampler):
        formulation = "rectified-flow"
        order = 1

        def __init__(self, n_steps: int = 8, *, shift: float = 1.0):
            super().__init__(n_steps)
            self.shift = shift

        def levels(self):
            return shifted_levels(self.steps, self.shift)

        def num_evaluations(self):
            return self.steps

        def _run(self, evaluate, x, levels, generator, callback):
            for s, s_next in zip(levels[:-1], levels[1:]):
                x = x + (s_next - s) * evaluate(x, s)
            return x


    @hookimpl
    def vfm_infer_register_samplers(register):
        register("other-steps", StepsByAnotherName)
"""


def test_a_sampler_naming_its_step_count_otherwise_refuses_it_as_an_option_naming_the_request(plugin):
    plugin("vfm-author-steps", {"author_steps": SAMPLER}, {"vfm_infer": "author_steps"})
    import vfm_infer
    from vfm_infer.samplers.base import build_sampler

    cls = vfm_infer.host.get("samplers", "other-steps")
    sampler = build_sampler("other-steps", cls, 3, {"shift": 2.0}, {})
    assert (sampler.steps, sampler.shift) == (3, 2.0)
    with pytest.raises(ValueError) as error:
        build_sampler("other-steps", cls, 3, {}, {"n_steps": 2})
    assert str(error.value) == ("sampler 'other-steps' has no option n_steps (set by the steps of the request); "
                                "its options: shift")
