"""The plugin-host kit (vfm-plugins, shared by all five hosts), exercised through the vfm_models host."""

from __future__ import annotations

import warnings

import pytest

from vfm_models import host
from vfm_plugins import DISABLE_ENV, DuplicateNameError, UnknownNameError


def test_builtin_names_are_registered_with_their_package_as_provider():
    entry = host.entry("tokenizers", "pixel")
    assert entry.provider == "vfm-models"
    assert entry.version != "unknown"


def test_unknown_name_error_lists_the_available_names():
    with pytest.raises(UnknownNameError) as err:
        host.get("tokenizers", "no-such-tokenizer")
    message = str(err.value)
    assert "no-such-tokenizer" in message and "pixel" in message and "available" in message


def test_third_party_family_is_discovered_and_builds_by_name(with_plugins):
    import torch

    import vfm_models

    with_plugins("vfm-plugin-tinyfamily")
    entry = host.entry("families", "tiny-mixer")
    assert (entry.provider, entry.version) == ("vfm-plugin-tinyfamily", "0.3.1")
    family = vfm_models.get_family("tiny-mixer")
    model = family.create("S")
    x = torch.randn(2, 4, 3, 5, 5)
    assert model(x).shape == x.shape
    assert model.parallel_plan().num_layers == 2


def test_duplicate_name_error_names_both_providers(with_plugins):
    with_plugins("vfm-plugin-duplicate")
    with pytest.raises(DuplicateNameError) as err:
        host.names("tokenizers")
    message = str(err.value)
    assert "'pixel'" in message
    assert "vfm-models" in message and "vfm-plugin-duplicate 2.0.0" in message


def test_broken_plugin_warns_with_its_name_and_the_rest_keeps_working(with_plugins):
    with_plugins("vfm-plugin-broken", "vfm-plugin-tinyfamily")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        names = host.names("families")
    assert "tiny-mixer" in names
    assert host.names("tokenizers") == sorted(host.names("tokenizers"))
    assert any("vfm-plugin-broken" in str(w.message) for w in caught)
    failed = host.failed()
    assert [f.provider for f in failed] == ["vfm-plugin-broken"]
    assert "vfm_plugin_broken_missing_dependency" in failed[0].error


def test_environment_variable_switches_third_party_autoloading_off(with_plugins, monkeypatch):
    with_plugins("vfm-plugin-tinyfamily")
    monkeypatch.setenv(DISABLE_ENV, "1")
    host.reload()
    assert "tiny-mixer" not in host.names("families")
    assert "pixel" in host.names("tokenizers"), "built-ins still load"
    monkeypatch.setenv(DISABLE_ENV, "vfm_parallel")  # another host only
    host.reload()
    assert "tiny-mixer" in host.names("families")


def test_lazy_target_is_not_imported_until_used(with_plugins):
    import sys

    with_plugins("vfm-plugin-everyhook")
    sys.modules.pop("vfm_plugin_everyhook.models", None)
    host.reload()
    entry = host.entry("families", "everyhook-families")
    assert entry.target == "vfm_plugin_everyhook.models:MARKER"
    assert entry.load() is sys.modules["vfm_plugin_everyhook.models"].MARKER


def test_unknown_kind_lists_the_kinds():
    with pytest.raises(UnknownNameError) as err:
        host.entries("widgets")
    assert "families" in str(err.value) and "samplers" not in str(err.value)


def test_unknown_name_error_names_the_kind_in_the_singular():
    import vfm_parallel

    with pytest.raises(UnknownNameError, match="unknown family 'nope'"):
        host.get("families", "nope")
    with pytest.raises(UnknownNameError, match="unknown text encoder 'nope'"):
        host.get("text_encoders", "nope")
    with pytest.raises(UnknownNameError, match="unknown strategy 'nope'"):
        vfm_parallel.host.get("strategies", "nope")


def test_every_host_raises_the_one_error_hierarchy_and_shares_one_register():
    """One kit: each package's host is a vfm_plugins.PluginHost and its hookspecs use vfm_plugins.Register."""
    import vfm_plugins
    from vfm_cli.hosts import all_hosts

    for h in all_hosts():
        assert type(h) is vfm_plugins.PluginHost, h.project
        assert h.hookspecs.Register is vfm_plugins.Register, h.project
        with pytest.raises(vfm_plugins.UnknownNameError):
            h.get(next(iter(h.kinds)), "no-such-name")


def test_kinds_are_the_hosts_register_hookspecs_in_the_order_they_are_defined():
    assert host.kinds == {kind: f"vfm_models_register_{kind}" for kind in ("families", "tokenizers", "text_encoders", "formulations", "adapters")}
