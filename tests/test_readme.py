"""The README's set-up commands are the ones CI runs."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command_exactly():
    ci = (ROOT / ".ci" / "run").read_text()
    command = re.search(r"^TEST_COMMAND='(.+)'$", ci, re.M).group(1)
    readme_commands = re.findall(r"^(pip install .+?)\s+#", (ROOT / "README.md").read_text(), re.M)
    assert command in readme_commands
    assert len(readme_commands) == 2, "the README shows exactly two set-up commands"


def test_readme_hook_table_names_every_kind_each_package_declares():
    import tomllib

    table = {m.group(1): m.group(2) for m in re.finditer(r"^\| (vfm_\w+) \| (.+) \|$", (ROOT / "README.md").read_text(), re.M)}
    for path in sorted(ROOT.glob("packages/*/src/*/plugins.toml")):
        host = path.parent.name
        kinds = list(tomllib.loads(path.read_text()))
        assert host in table, f"README hook table has no row for {host}"
        named = re.findall(r"`(?:\.\.\._|\w+_register_)(\w+)`", table[host])
        assert named == kinds, f"{host}: README lists {named}, plugins.toml declares {kinds}"
