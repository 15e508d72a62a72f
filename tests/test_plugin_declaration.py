"""A host declared as data (vfm_plugins.declaration): a package's ``plugins.toml`` gives its hooks
(names, docstrings, one ``register`` parameter) and its built-ins, which register through those hooks
beside a third-party plugin; a malformed file is an error naming the place and what is accepted."""

from __future__ import annotations

import inspect
import sys
import textwrap

import pluggy
import pytest

from vfm_plugins import DuplicateNameError, PluginError, PluginHost, parse_declaration, read_declaration

WIDGETS = """
[widgets]
hook = \"\"\"Register widgets. Target: a widget class
with ``spin()``.\"\"\"

[widgets.builtin]
round = { target = "toypkg_widgets_impl:Round", description = "a round widget" }
"square+" = { target = "toypkg_widgets_impl:Square" }

[gadgets]
hook = "Register gadgets. Target: anything."
"""


@pytest.fixture
def toypkg(tmp_path, monkeypatch):
    """A real package on sys.path with a plugins.toml, a hookspecs.py and a plugins.py written as
    the vfm packages write theirs; the widget classes live in a module nothing imports yet."""
    package = tmp_path / "toypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "plugins.toml").write_text(WIDGETS)
    (package / "hookspecs.py").write_text(textwrap.dedent("""
        from vfm_plugins import Register, declare_hookspecs
        globals().update(declare_hookspecs("toypkg"))
    """))
    (package / "plugins.py").write_text(textwrap.dedent("""
        from toypkg import hookspecs
        from vfm_plugins import PluginHost
        host = PluginHost(project="toypkg", distribution="toypkg", hookspecs=hookspecs,
                          declaration=hookspecs.declaration)
    """))
    (tmp_path / "toypkg_widgets_impl.py").write_text("class Round: ...\nclass Square: ...\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield package
    for name in [m for m in sys.modules if m.split(".")[0] in ("toypkg", "toypkg_widgets_impl")]:
        del sys.modules[name]
    read_declaration.cache_clear()


def test_hooks_are_generated_with_their_names_docstrings_and_one_register_parameter(toypkg):
    from toypkg import hookspecs
    from toypkg.plugins import host

    assert host.kinds == {"widgets": "toypkg_register_widgets", "gadgets": "toypkg_register_gadgets"}
    spec = hookspecs.toypkg_register_widgets
    assert spec.__name__ == "toypkg_register_widgets"
    assert inspect.getdoc(spec) == "Register widgets. Target: a widget class\nwith ``spin()``."
    assert list(inspect.signature(spec).parameters) == ["register"]
    assert getattr(spec, "toypkg_spec")  # pluggy's hookspec marker of this project


def test_builtins_register_lazily_through_the_hook_beside_a_third_party_plugin(toypkg):
    from toypkg.plugins import host

    marker = pluggy.HookimplMarker("toypkg")

    class ThirdParty:
        @marker
        def toypkg_register_widgets(self, register):
            register("cube", object, description="from elsewhere")

    pm, providers = host.plugin_manager()
    pm.register(ThirdParty(), name="third")
    widgets = {}
    for impl in pm.hook.toypkg_register_widgets.get_hookimpls():
        impl.function(register=lambda name, target, description="": widgets.__setitem__(name, (target, description)))
    assert widgets == {"round": ("toypkg_widgets_impl:Round", "a round widget"),
                       "square+": ("toypkg_widgets_impl:Square", ""), "cube": (object, "from elsewhere")}
    assert providers["toypkg/plugins.toml"].name == "toypkg"

    assert host.names("widgets") == ["round", "square+"] and host.names("gadgets") == []
    assert "toypkg_widgets_impl" not in sys.modules, "listing must not import the targets"
    assert host.get("widgets", "round").__name__ == "Round"
    assert host.entry("widgets", "round").provider == "toypkg"


def test_a_plugin_reusing_a_builtin_name_is_refused_naming_both(toypkg):
    from toypkg import hookspecs

    marker = pluggy.HookimplMarker("toypkg")

    class Clash:
        @marker
        def toypkg_register_widgets(self, register):
            register("round", object)

    class ClashingHost(PluginHost):
        def plugin_manager(self):
            pm, providers = super().plugin_manager()
            pm.register(Clash(), name="clash")
            providers["clash"] = type(providers["toypkg/plugins.toml"])("clash-dist", "9.9")
            return pm, providers

    host = ClashingHost(project="toypkg", distribution="toypkg", hookspecs=hookspecs, declaration=hookspecs.declaration)
    with pytest.raises(DuplicateNameError, match="widgets name 'round' is registered twice") as err:
        host.names("widgets")
    assert "by toypkg" in str(err.value) and "clash-dist 9.9" in str(err.value)


@pytest.mark.parametrize(("text", "message"), [
    ("[bad-kind]\nhook = 'x'", r"\[bad-kind\]: a kind name must be a Python identifier"),
    ("[widgets]\nbuiltin = {}", r"\[widgets\]: `hook` must be a non-empty string"),
    ("[widgets]\nhook = 'x'\ndoc = 'y'", r"\[widgets\]: unknown key\(s\) doc; accepted: hook, builtin"),
    ("[widgets]\nhook = 'x'\n[widgets.builtin]\nround = { target = 'no_colon' }", r"round: target must be a \"module:attr\" string, got 'no_colon'"),
    ("[widgets]\nhook = 'x'\n[widgets.builtin]\nround = { target = 'm:a', descr = 'y' }", r"round: unknown key\(s\) descr; accepted: target, description"),
    ("[widgets]\nhook = 'x'\n[widgets.builtin]\nround = 'm:a'", r"round: must be a table \{ target"),
    ("widgets = 1", r"\[widgets\]: a kind is a table with `hook`"),
    ("", "declares no kind"),
    ("[widgets", "not valid TOML"),
])
def test_a_malformed_declaration_names_the_place_and_what_is_accepted(text, message):
    with pytest.raises(PluginError, match=message) as err:
        parse_declaration("toypkg", text, source="toypkg/plugins.toml")
    assert str(err.value).startswith("toypkg/plugins.toml")


def test_a_package_without_a_declaration_is_a_clear_error(tmp_path, monkeypatch):
    (tmp_path / "emptypkg").mkdir()
    (tmp_path / "emptypkg" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(PluginError, match="emptypkg: no plugins.toml in the package"):
            read_declaration("emptypkg")
    finally:
        sys.modules.pop("emptypkg", None)


@pytest.mark.parametrize("package", ["vfm_models", "vfm_parallel", "vfm_data", "vfm_curator", "vfm_infer"])
def test_each_library_host_is_declared_by_its_plugins_toml(package):
    """The hosts' kinds and built-ins come from the file (and nothing registers built-ins in code)."""
    import importlib

    host = importlib.import_module(f"{package}.plugins").host
    declaration = read_declaration(package)
    assert host.declaration == declaration and host.builtins == ()
    assert host.kinds == declaration.kinds
    for kind, entries in declaration.builtins.items():
        for entry in entries:
            registered = host.entry(kind, entry.name)
            assert (registered.target, registered.description) == (entry.target, entry.description)
            assert registered.provider == package.replace("_", "-")
