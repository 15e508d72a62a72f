"""Mistakes a third-party plugin author makes are one-line errors naming the plugin and what is
expected, not silence and not a traceback from inside pluggy or importlib. Each plugin here is a real
package (a module and a dist-info with entry points) that the real hosts load through pluggy."""

from __future__ import annotations

import textwrap
import warnings

import pytest

import vfm_infer
import vfm_models
from vfm_curator.plugins import host as curator_host
from vfm_plugins import DuplicateNameError, PluginError, PluginLoadError, PluginWarning, parse_declaration


def failed_error(host, dist: str) -> str:
    """The one failure recorded for ``dist``; its loading warned with the same text."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        failed = [f for f in host.failed() if f.provider == dist]
    assert len(failed) == 1, host.failed()
    error = failed[0].error
    assert "\n" not in error, error
    assert any(w.category is PluginWarning and dist in str(w.message) and error in str(w.message) for w in caught)
    return error


def hook_failure(plugin, name: str, hook: str, *, host: str = "vfm_models", marker: str = "") -> str:
    """The failure of plugin ``vfm-author-NAME``: its module ``author_NAME``, ``host``'s entry point, is
    ``hook`` below the import of ``marker``'s hookimpl (the host's own by default)."""
    module = f"author_{name}"
    plugin(f"vfm-author-{name}", {module: f"from {marker or host}.plugins import hookimpl\n\n" + textwrap.dedent(hook)},
           {host: module})
    return failed_error({"vfm_models": vfm_models.host, "vfm_infer": vfm_infer.host}[host], f"vfm-author-{name}")


def misnamed_hook_error(plugin, name: str, function: str) -> str:
    """The failure of plugin ``vfm-author-NAME`` whose one hookimpl, named ``function``, registers a family."""
    return hook_failure(plugin, name, f"""
        @hookimpl
        def {function}(register):
            register("{name}-family", "author_{name}:FAMILY")
    """)


def test_hookimpl_with_a_wrong_parameter_name_is_one_line_naming_the_expected_signature(plugin):
    error = hook_failure(plugin, "sig", """
        @hookimpl
        def vfm_models_register_families(reg):
            reg("sig-family", "author_sig:FAMILY")
    """)
    assert "vfm_models_register_families(reg) has the wrong signature" in error
    assert "expected vfm_models_register_families(register)" in error
    assert "sig-family" not in vfm_models.host.names("families")


def test_hookimpl_without_arguments_is_refused_before_it_is_called(plugin):
    error = hook_failure(plugin, "noarg", """
        @hookimpl
        def vfm_infer_register_samplers():
            pass
    """, host="vfm_infer")
    assert "vfm_infer_register_samplers() has the wrong signature" in error


def test_a_misspelt_hook_is_a_failed_plugin_suggesting_the_real_hook_not_silence(plugin):
    error = misnamed_hook_error(plugin, "typo", "vfm_models_register_family")
    assert "vfm_models_register_family is not a hook of vfm_models" in error
    assert "did you mean vfm_models_register_families?" in error


def test_a_marked_hook_misspelt_outside_register_is_suggested_not_called_a_module_without_hooks(plugin):
    # the no-hooks check (today's) caught every marked name not starting with vfm_models_register_
    error = misnamed_hook_error(plugin, "typo2", "vfm_models_regster_families")
    assert error.startswith("vfm_models_regster_families is not a hook of vfm_models; did you mean "
                            "vfm_models_register_families?"), error


def test_a_marked_hook_without_the_hosts_prefix_is_named_with_the_real_hook(plugin):
    # was called a module without hooks, to be declared under the group it already was in
    error = misnamed_hook_error(plugin, "bare", "register_families")
    assert error.startswith("register_families is not a hook of vfm_models; did you mean "
                            "vfm_models_register_families?"), error


def test_a_hook_without_the_hookimpl_marker_is_a_failed_plugin_saying_how_to_mark_it(plugin):
    plugin("vfm-author-nomark", {"author_nomark": """
        def vfm_curator_register_stages(register):
            register("unmarked", "author_nomark:Stage")
    """}, {"vfm_curator": "author_nomark"})
    error = failed_error(curator_host, "vfm-author-nomark")
    assert "vfm_curator_register_stages has no @hookimpl marker" in error
    assert "from vfm_curator.plugins import hookimpl" in error


def test_a_hook_marked_with_another_hosts_marker_is_named(plugin):
    error = hook_failure(plugin, "othermark", """
        @hookimpl
        def vfm_models_register_families(register):
            register("other", "author_othermark:FAMILY")
    """, marker="vfm_infer")
    assert "marked with the vfm_infer hookimpl, not vfm_models's" in error


def test_one_module_may_serve_two_hosts_with_each_hosts_marker(plugin):
    """The marker check must not flag the other host's hooks in a module listed in two groups."""
    plugin("vfm-author-two", {"author_two": """
        from vfm_infer.plugins import hookimpl as infer_hookimpl
        from vfm_models.plugins import hookimpl as models_hookimpl

        @models_hookimpl
        def vfm_models_register_formulations(register):
            register("two-form", "vfm_models.formulations.edm:EDM")

        @infer_hookimpl
        def vfm_infer_register_samplers(register):
            register("two-sampler", "vfm_infer.samplers.flow:FlowEuler")
    """}, {"vfm_models": "author_two", "vfm_infer": "author_two"})
    assert "two-form" in vfm_models.host.names("formulations")
    assert "two-sampler" in vfm_infer.host.names("samplers")
    assert not vfm_models.host.failed() and not vfm_infer.host.failed()


def test_an_import_error_in_the_plugin_module_is_one_line_naming_module_and_cause(plugin):
    plugin("vfm-author-imp", {"author_imp": """
        import author_missing_dependency
    """}, {"vfm_infer": "author_imp"})
    error = failed_error(vfm_infer.host, "vfm-author-imp")
    assert error == "failed to import 'author_imp': ModuleNotFoundError: No module named 'author_missing_dependency'"
    assert "flow-euler" in vfm_infer.host.names("samplers"), "the rest keeps working"


def test_register_with_description_as_a_positional_argument_names_the_register_signature(plugin):
    error = hook_failure(plugin, "regargs", """
        @hookimpl
        def vfm_models_register_families(register):
            register("regargs", "author_regargs:FAMILY", "my family")
    """)
    assert "register(name, target, *, description='')" in error and "too many positional arguments" in error


def test_a_dotted_string_target_without_a_colon_is_refused_at_registration(plugin):
    """``"pkg.mod.FAMILY"`` would otherwise come back from get_family as the string itself."""
    error = hook_failure(plugin, "dotted", """
        @hookimpl
        def vfm_models_register_families(register):
            register("dotted", "author_dotted.FAMILY")
    """)
    assert 'a string target must be "module:attr"' in error and "'author_dotted.FAMILY'" in error


def test_a_lazy_target_whose_import_fails_is_a_plugin_load_error_naming_provider_and_target(plugin):
    plugin("vfm-author-lazy", {
        "author_lazy": """
            from vfm_infer.plugins import hookimpl

            @hookimpl
            def vfm_infer_register_samplers(register):
                register("lazy-sampler", "author_lazy_impl:Sampler")
        """,
        "author_lazy_impl": "import author_missing_dependency_2\n",
    }, {"vfm_infer": "author_lazy"})
    assert "lazy-sampler" in vfm_infer.host.names("samplers"), "listing does not import the target"
    with pytest.raises(PluginLoadError) as err:
        vfm_infer.host.get("samplers", "lazy-sampler")
    message = str(err.value)
    assert message.startswith("sampler 'lazy-sampler' (from vfm-author-lazy 0.0.1) cannot be loaded")
    assert "'author_lazy_impl:Sampler'" in message and "No module named 'author_missing_dependency_2'" in message
    assert isinstance(err.value, ImportError) and isinstance(err.value.__cause__, ModuleNotFoundError)


def test_a_target_naming_a_missing_attribute_is_a_plugin_load_error(plugin):
    plugin("vfm-author-attr", {"author_attr": """
        from vfm_models.plugins import hookimpl

        @hookimpl
        def vfm_models_register_families(register):
            register("attr-family", "author_attr:FAMLY")
    """}, {"vfm_models": "author_attr"})
    with pytest.raises(PluginLoadError, match="module author_attr has no attribute 'FAMLY'"):
        vfm_models.get_family("attr-family")


def test_a_sampler_without_its_formulation_names_what_a_sampler_must_have(plugin):
    plugin("vfm-author-noform", {"author_noform": """
        import torch

        from vfm_infer.plugins import hookimpl
        from vfm_infer.samplers.base import Sampler

        class Midpoint(Sampler):  # forgot: formulation = "rectified-flow"
            order = 2

            def levels(self):
                return torch.linspace(1, 0, self.steps + 1, dtype=torch.float64)

            def num_evaluations(self):
                return 2 * self.steps

            def _run(self, evaluate, x, levels, generator, callback):
                return x

        @hookimpl
        def vfm_infer_register_samplers(register):
            register("no-formulation", Midpoint)
    """}, {"vfm_infer": "author_noform"})
    with pytest.raises(PluginLoadError) as err:
        vfm_infer.host.get("samplers", "no-formulation")
    message = str(err.value)
    assert message.startswith("sampler 'no-formulation' (from vfm-author-noform 0.0.1, target author_noform:Midpoint) "
                              "lacks formulation;")
    assert "a sampler must have: formulation, order, levels, num_evaluations, sample" in message


def test_a_family_target_that_is_a_class_not_a_model_family_names_what_is_missing(plugin):
    plugin("vfm-author-notfamily", {"author_notfamily": """
        from vfm_models.plugins import hookimpl

        class MyNet:  # the nn.Module itself, not vfm_models.families.ModelFamily(...)
            pass

        @hookimpl
        def vfm_models_register_families(register):
            register("not-a-family", MyNet)
    """}, {"vfm_models": "author_notfamily"})
    with pytest.raises(PluginLoadError, match="family 'not-a-family' .* lacks name, config_cls, presets, config, create"):
        vfm_models.get_family("not-a-family")


def test_a_stage_that_is_not_a_stage_class_names_what_a_stage_must_have(plugin):
    plugin("vfm-author-stage", {"author_stage": """
        from vfm_curator.plugins import hookimpl

        def brighten(task):
            return task

        @hookimpl
        def vfm_curator_register_stages(register):
            register("brighten", brighten)
    """}, {"vfm_curator": "author_stage"})
    with pytest.raises(PluginLoadError, match="stage 'brighten' .* lacks name, resources, batch_size, defaults, process"):
        curator_host.get("stages", "brighten")


def test_a_name_clash_with_a_builtin_names_the_builtin_first_and_the_plugins_entry_point(plugin):
    plugin("vfm-author-clash", {"author_clash": """
        from vfm_infer.plugins import hookimpl

        @hookimpl
        def vfm_infer_register_samplers(register):
            register("edm-heun", "author_clash:Sampler")
    """}, {"vfm_infer": "author_clash"}, version="3.1")
    with pytest.raises(DuplicateNameError) as err:
        vfm_infer.host.names("samplers")
    message = str(err.value)
    assert "samplers name 'edm-heun' is registered twice: by vfm-infer " in message
    assert "and by vfm-author-clash 3.1 (plugin vfm-author-clash:vfm-author-clash)" in message
    assert "VFM_DISABLE_PLUGIN_AUTOLOAD=vfm_infer" in message


def test_declaration_requires_must_be_a_list_of_attribute_names():
    with pytest.raises(PluginError, match=r"\[widgets\]: `requires` must be a list of attribute names"):
        parse_declaration("toypkg", '[widgets]\nhook = "Register widgets."\nrequires = "spin"\n')
    declared = parse_declaration("toypkg", '[widgets]\nhook = "Register widgets."\nrequires = ["spin"]\n')
    assert declared.requires == {"widgets": ("spin",)}


def _required_kinds():
    from vfm_cli.hosts import all_hosts

    return [(h.project, kind, attrs) for h in all_hosts() for kind, attrs in h.declaration.requires.items()]


@pytest.mark.parametrize(("project", "kind", "attrs"), _required_kinds(), ids=lambda v: v if isinstance(v, str) else None)
def test_every_kind_that_requires_attributes_names_them_for_a_target_lacking_them(plugin, project, kind, attrs):
    plugin("vfm-author-empty", {"author_empty": f"""
        from {project}.plugins import hookimpl

        class Empty:
            pass

        @hookimpl
        def {project}_register_{kind}(register):
            register("empty-thing", Empty)
    """}, {project: "author_empty"})
    from vfm_cli.hosts import all_hosts

    host = {h.project: h for h in all_hosts()}[project]
    with pytest.raises(PluginLoadError, match=f"lacks {', '.join(attrs)}; a .* must have: {', '.join(attrs)}"):
        host.get(kind, "empty-thing")


@pytest.mark.parametrize(("project", "kind", "attrs"), _required_kinds(), ids=lambda v: v if isinstance(v, str) else None)
def test_every_builtin_has_what_its_kind_requires(project, kind, attrs):
    from vfm_cli.hosts import all_hosts

    host = {h.project: h for h in all_hosts()}[project]
    for name, entry in host.entries(kind).items():
        if entry.provider == host.distribution:
            host.get(kind, name)  # raises PluginLoadError naming what is missing


@pytest.mark.parametrize("group", ["vfm_model", "vfm-models", "vfm_samplers"])
def test_an_entry_point_in_a_misspelt_host_group_is_reported_not_silently_ignored(plugin, group):
    from vfm_cli.hosts import all_hosts
    from vfm_plugins import misplaced_entry_points

    plugin("vfm-author-group", {"author_group": """
        from vfm_models.plugins import hookimpl

        @hookimpl
        def vfm_models_register_families(register):
            register("group-family", "author_group:FAMILY")
    """}, {group: "author_group"})
    assert "group-family" not in vfm_models.host.names("families")
    (found,) = [f for f in misplaced_entry_points(h.project for h in all_hosts()) if f.provider == "vfm-author-group"]
    assert found.host == group and found.name == "vfm-author-group:vfm-author-group"
    assert f"entry point in group {group!r}, which is not a vfm plugin host, so nothing loads it" in found.error
    if group != "vfm_samplers":
        assert "did you mean vfm_models?" in found.error


def test_a_hookimpl_whose_other_parameters_have_defaults_is_accepted(plugin):
    plugin("vfm-author-defaults", {"author_defaults": """
        from vfm_models.plugins import hookimpl

        @hookimpl
        def vfm_models_register_formulations(register, prefix="author"):
            register(prefix + "-edm", "vfm_models.formulations.edm:EDM")
    """}, {"vfm_models": "author_defaults"})
    assert "author-edm" in vfm_models.host.names("formulations") and not vfm_models.host.failed()


def test_a_stage_that_inherits_the_default_name_is_refused_naming_the_name_to_set(plugin):
    """Otherwise it runs as 'stage' in the progress bars, the workers figure and the balancer log."""
    plugin("vfm-author-noname", {"author_noname": """
        from vfm_curator.plugins import hookimpl
        from vfm_curator.stages.base import Stage

        class KeepFirst(Stage):  # forgot: name = "keep-first"
            defaults = {"keep": 1}

            def process_one(self, task):
                task.clips = task.clips[: self.opt["keep"]]

        @hookimpl
        def vfm_curator_register_stages(register):
            register("keep-first", KeepFirst)
    """}, {"vfm_curator": "author_noname"})
    with pytest.raises(PluginLoadError) as err:
        curator_host.get("stages", "keep-first")
    assert str(err.value) == ("stage 'keep-first' (from vfm-author-noname 0.0.1, target author_noname:KeepFirst) has "
                              "name = 'stage'; it must be the name it is registered as: set name = 'keep-first'")
