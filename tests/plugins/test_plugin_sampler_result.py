"""A plugin sampler whose ``_run`` hands back no latents (None, a numpy array, a tensor of another shape) is
one ``PluginResultError`` naming the sampler, its package and what ``_run`` must return; it failed later as
``isfinite(): argument 'input' must be Tensor, not NoneType`` or in the tokenizer's decode, naming neither."""

from __future__ import annotations

import pytest
import torch

SAMPLER = """
    from vfm_infer.plugins import hookimpl
    from vfm_infer.samplers import Sampler
    from vfm_infer.samplers.flow import shifted_levels


    class Broken(Sampler):
        formulation = "rectified-flow"
        order = 1
        returns = "latents"

        def levels(self):
            return shifted_levels(self.steps, 1.0)

        def num_evaluations(self):
            return self.steps

        def _run(self, evaluate, x, levels, generator, callback):
            for s, s_next in zip(levels[:-1], levels[1:]):
                x = x + (s_next - s) * evaluate(x, s)
            return {"latents": x, "none": None, "numpy": x.numpy(), "one channel": x[:, :1]}[self.returns]


    @hookimpl
    def vfm_infer_register_samplers(register):
        register("author-broken", Broken)
"""

EXPECTED = ("sampler 'author-broken' (from vfm-author-result 0.0.1, class author_result.Broken): _run returned {got}; "
            "a sampler's _run returns the final latents x, a torch.Tensor of the noise's shape (2, 3, 2, 4, 4)")


@pytest.mark.parametrize(("returns", "got"), [("none", "None"), ("numpy", "a numpy.ndarray"),
                                              ("one channel", "a tensor of shape (2, 1, 2, 4, 4)")])
def test_a_plugin_sampler_returning_no_latents_is_refused_naming_the_sampler_and_what_run_returns(plugin, returns, got):
    from vfm_plugins import PluginResultError

    plugin("vfm-author-result", {"author_result": SAMPLER}, {"vfm_infer": "author_result"})
    import vfm_infer

    sampler = vfm_infer.get_sampler("author-broken")(3)
    sampler.returns = returns
    with pytest.raises(PluginResultError) as error:
        sampler.sample(lambda x, level: -x, torch.randn(2, 3, 2, 4, 4))
    assert str(error.value) == EXPECTED.format(got=got)


def test_a_plugin_sampler_returning_its_latents_samples_as_before(plugin):
    plugin("vfm-author-result", {"author_result": SAMPLER}, {"vfm_infer": "author_result"})
    import vfm_infer

    noise = torch.randn(2, 3, 2, 4, 4)
    out = vfm_infer.get_sampler("author-broken")(3).sample(lambda x, level: torch.zeros_like(x), noise)
    assert torch.equal(out, noise)  # zero velocity: the noise itself (level 1 at the start)
