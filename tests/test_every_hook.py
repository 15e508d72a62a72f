"""Every hook of every host is implemented by a real installed package and registers through it;
every hook is typed and documented."""

from __future__ import annotations

import inspect

import pytest

from vfm_cli.hosts import all_hosts

HOSTS = {h.project: h for h in all_hosts()}
HOOKS = [(project, kind, hook) for project, h in HOSTS.items() for kind, hook in h.kinds.items()]


def test_all_five_library_hosts_are_installed():
    assert sorted(HOSTS) == ["vfm_curator", "vfm_data", "vfm_infer", "vfm_models", "vfm_parallel"]


@pytest.mark.parametrize(("project", "kind", "hook"), HOOKS, ids=[h for _, _, h in HOOKS])
def test_hook_registers_names_from_a_third_party_package(with_plugins, project, kind, hook):
    with_plugins("vfm-plugin-everyhook")
    entry = HOSTS[project].entry(kind, f"everyhook-{kind}")
    assert (entry.provider, entry.version) == ("vfm-plugin-everyhook", "1.2.3")
    assert entry.load() is not None


@pytest.mark.parametrize(("project", "kind", "hook"), HOOKS, ids=[h for _, _, h in HOOKS])
def test_hook_is_typed_and_documented(project, kind, hook):
    spec = getattr(HOSTS[project].hookspecs, hook)
    assert inspect.getdoc(spec), f"{hook} has no docstring"
    params = inspect.signature(spec).parameters
    assert list(params) == ["register"], f"{hook} must take exactly one argument, register"
    assert params["register"].annotation != inspect.Parameter.empty


def test_every_hookspec_is_a_registry_kind():
    """A hookspec that no kind uses would never be called (and so never tested)."""
    for project, h in HOSTS.items():
        specs = {n for n, f in inspect.getmembers(h.hookspecs, inspect.isfunction) if n.startswith(project)}
        assert specs == set(h.kinds.values()), project
