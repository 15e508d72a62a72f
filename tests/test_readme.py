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
