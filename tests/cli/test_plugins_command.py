"""``vfm plugins``: lists built-ins and third-party plugins with provider and version."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import plugin_env


def run_vfm(*args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vfm_cli.main", *args], capture_output=True, text=True, env=env)


def test_plugins_json_shows_builtins_and_external_plugin_with_provider_and_version(installed_plugins):
    result = run_vfm("plugins", "--json", env=plugin_env([installed_plugins("vfm-plugin-tinyfamily")]))
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    by_name = {(r["kind"], r["name"]): r for r in rows}
    builtin = by_name[("tokenizers", "pixel")]
    assert (builtin["host"], builtin["provider"], builtin["status"]) == ("vfm_models", "vfm-models", "ok")
    external = by_name[("families", "tiny-mixer")]
    assert (external["provider"], external["version"], external["status"]) == ("vfm-plugin-tinyfamily", "0.3.1", "ok")


def test_plugins_shows_a_broken_plugin_as_failed_and_still_succeeds(installed_plugins):
    env = plugin_env([installed_plugins("vfm-plugin-broken")])
    result = run_vfm("plugins", "--json", env=env)
    assert result.returncode == 0, result.stderr
    failed = [r for r in json.loads(result.stdout) if r["status"] == "failed"]
    assert [r["provider"] for r in failed] == ["vfm-plugin-broken"]
    table = run_vfm("plugins", env=env)
    assert table.returncode == 0 and "failed" in table.stdout


def test_plugins_with_duplicate_name_exits_1_naming_both_providers(installed_plugins):
    result = run_vfm("plugins", env=plugin_env([installed_plugins("vfm-plugin-duplicate")]))
    assert result.returncode == 1
    assert "vfm-models" in result.stderr and "vfm-plugin-duplicate" in result.stderr


def test_plugins_unknown_kind_is_a_bad_parameter_listing_kinds():
    result = run_vfm("plugins", "--kind", "widgets")
    assert result.returncode == 2
    assert "tokenizers" in result.stderr
