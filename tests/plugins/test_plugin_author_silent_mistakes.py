"""Plugin mistakes that used to pass without a word, or surface far from their cause: an entry point
naming a module without the host's hooks, a name looked up whose plugin failed to load, a class left
abstract. Each plugin is a real package (a module and a dist-info with entry points) that the real
hosts load through pluggy."""

from __future__ import annotations

import warnings

import pytest

import vfm_infer
from vfm_plugins import PluginLoadError, PluginWarning, UnknownNameError

SAMPLER = """
    from vfm_infer.plugins import hookimpl
    from vfm_infer.samplers import Sampler


    class Halfway(Sampler):
        formulation = "rectified-flow"
        order = 1

        def levels(self):
            return [1.0 - i / self.steps for i in range(self.steps + 1)]

        def num_evaluations(self):
            return self.steps
{run}

    @hookimpl
    def vfm_infer_register_samplers(register):
        register("halfway", Halfway)
"""
RUN = """
        def _run(self, evaluate, x, levels, generator, callback):
            for s, s_next in zip(levels[:-1], levels[1:]):
                x = x + (s_next - s) * evaluate(x, s)
            return x
"""


def failures(host, dist: str) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        errors = [f.error for f in host.failed() if f.provider == dist]
    assert all(any(e in str(w.message) for w in caught if w.category is PluginWarning) for e in errors)
    return errors


def test_an_entry_point_naming_a_module_without_the_hosts_hooks_is_a_failed_plugin_not_silence(plugin):
    # the commonest packaging slip: the entry point names the package, not the module with the hooks
    plugin("vfm-author-pkg", {"author_pkg": '"""The package: its hooks are in author_pkg_hooks."""\n',
                              "author_pkg_hooks": SAMPLER.format(run=RUN)}, {"vfm_infer": "author_pkg"})
    [error] = failures(vfm_infer.host, "vfm-author-pkg")
    assert error.startswith("author_pkg implements none of vfm_infer's hooks (vfm_infer_register_metrics, "
                            "vfm_infer_register_samplers), so it would add nothing")
    assert "must name the module holding them" in error
    rows = [r for r in vfm_infer.host.describe() if r["provider"] == "vfm-author-pkg"]
    assert [(r["status"], r["name"]) for r in rows] == [("failed", "vfm-author-pkg:vfm-author-pkg")]


def test_an_entry_point_in_the_wrong_hosts_group_names_the_group_its_hooks_belong_in(plugin):
    plugin("vfm-author-swapped", {"author_swapped": SAMPLER.format(run=RUN)}, {"vfm_models": "author_swapped"})
    import vfm_models

    [error] = failures(vfm_models.host, "vfm-author-swapped")
    assert "author_swapped implements none of vfm_models's hooks" in error
    assert error.endswith("it holds vfm_infer_register_samplers (a vfm_infer hook): declare it under "
                          "[project.entry-points.vfm_infer] instead")


def test_a_module_serving_its_host_with_helpers_beside_the_hooks_is_not_refused(plugin):
    plugin("vfm-author-ok", {"author_ok": SAMPLER.format(run=RUN) + "\n    def helper():\n        pass\n"},
           {"vfm_infer": "author_ok"})
    assert failures(vfm_infer.host, "vfm-author-ok") == []
    assert vfm_infer.host.get("samplers", "halfway").__name__ == "Halfway"


def test_an_unknown_name_names_the_plugins_of_its_host_that_failed_to_load(plugin):
    plugin("vfm-author-raises", {"author_raises": 'raise RuntimeError("licence server unreachable")\n'},
           {"vfm_infer": "author_raises"})
    with pytest.warns(PluginWarning):
        vfm_infer.host.reload()
        vfm_infer.host.names("samplers")
    with pytest.raises(UnknownNameError) as caught:
        vfm_infer.host.get("samplers", "halfway")
    message = caught.value.args[0]
    assert message.startswith("unknown sampler 'halfway'; available: ") and "edm-heun" in message
    assert message.endswith("; plugin 'vfm-author-raises:vfm-author-raises' (vfm-author-raises 0.0.1) failed to load: "
                            "failed to import 'author_raises': RuntimeError: licence server unreachable")


def test_an_unknown_name_with_no_failed_plugin_lists_the_available_names_only(plugin):
    with pytest.raises(UnknownNameError) as caught:
        vfm_infer.host.get("samplers", "halfway")
    assert "failed to load" not in caught.value.args[0]


def test_a_sampler_class_left_abstract_is_a_load_error_naming_the_method_to_define(plugin):
    plugin("vfm-author-abstract", {"author_abstract": SAMPLER.format(run="")}, {"vfm_infer": "author_abstract"})
    with pytest.raises(PluginLoadError) as caught:
        vfm_infer.host.get("samplers", "halfway")
    assert caught.value.args[0] == (
        "sampler 'halfway' (from vfm-author-abstract 0.0.1, target author_abstract:Halfway) is an abstract class: "
        "define _run (abstract in vfm_infer.samplers.base.Sampler) in Halfway")


def test_a_hook_returning_its_names_instead_of_calling_register_is_a_failed_plugin_not_silence(plugin):
    # pluggy hands a hook's return value back to the host, which reads only the register calls: a hook
    # written as `return {"halfway": Halfway}` added nothing and `vfm plugins` showed no trace of it
    returning = SAMPLER.format(run=RUN).replace('register("halfway", Halfway)', 'return {"halfway": Halfway}')
    plugin("vfm-author-returns", {"author_returns": returning}, {"vfm_infer": "author_returns"})
    [error] = failures(vfm_infer.host, "vfm-author-returns")
    assert error.startswith("vfm_infer_register_samplers returned a dict ({'halfway': <class ")
    assert "without calling register" in error and "call register(name, target, *, description='') once per sampler" in error
    rows = [r for r in vfm_infer.host.describe() if r["provider"] == "vfm-author-returns"]
    assert [r["status"] for r in rows] == ["failed"]
    with pytest.raises(UnknownNameError, match="plugin 'vfm-author-returns:vfm-author-returns'"):
        vfm_infer.host.get("samplers", "halfway")
