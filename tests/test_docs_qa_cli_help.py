"""`vfm --help` and each command's `--help` as a first-time user reads them: one summary row per
command, and no option whose help states one default while the `[default: ...]` tag shows another."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

COMMANDS = ["convert", "curate", "demo", "eval", "export", "generate", "plan", "plugins", "shard", "train"]


def vfm_help(*args: str) -> str:
    env = {**os.environ, "COLUMNS": "1000", "NO_COLOR": "1", "TERM": "dumb"}
    result = subprocess.run([sys.executable, "-m", "vfm_cli.main", *args, "--help"], capture_output=True, text=True,
                            env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_command_list_gives_each_command_one_unbroken_summary():
    """Typer keeps the line breaks of a docstring's first paragraph in the command list: a summary
    wrapped at the source's margin printed as ragged rows under a wide terminal."""
    text = vfm_help()
    panel = text[text.index("Commands"):]
    rows = [line.strip("│ ").rstrip() for line in panel.splitlines()[1:] if line.startswith("│")]
    names = [row.split()[0] for row in rows if row and not row.startswith(" ")]
    assert names == COMMANDS
    assert len(rows) == len(COMMANDS), "a command's summary spans several rows:\n" + "\n".join(rows)


@pytest.mark.parametrize("command", ["plan", "generate", "eval", "curate", "shard", "demo"])
def test_no_option_shows_a_default_tag_that_contradicts_its_help(command):
    """An option documented as '(default: the config's ...)' whose sentinel value (0, None) is also shown
    as '[default: 0]' describes its default two ways."""
    for line in vfm_help(command).splitlines():
        said = re.search(r"\(default: ([^)]*)\)", line)
        tag = re.search(r"\[default: ([^\]]*)\]", line)
        if said and tag:
            assert tag.group(1).lower() in said.group(1).lower(), f"vfm {command}: {line.strip()}"


def test_every_option_the_docs_give_a_vfm_command_is_one_it_takes():
    """A page that writes `vfm shard ... --max-crop 0.3` sends a reader to an option: each `--flag` after
    `vfm <command>` (in code spans and code blocks of the READMEs and docs/) is in that command's --help."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    pages = [root / "README.md", *sorted(root.glob("packages/*/README.md")), *sorted(root.glob("docs/*.md"))]
    taken = {command: set(re.findall(r"--[a-z][a-z0-9-]*", vfm_help(command))) | {"--help"} for command in COMMANDS}
    named, wrong = 0, []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for span in re.findall(r"`([^`\n]+)`", text) + text.replace("\\\n", " ").splitlines():
            for match in re.finditer(rf"(?:\bvfm|vfm_cli\.main)\s+({'|'.join(COMMANDS)})\b([^`#;|]*)", span):
                command = match.group(1)
                args = re.split(r"\bvfm\b|torchrun|\)\s", match.group(2))[0]  # up to the next command
                for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", args):
                    named += 1
                    if flag not in taken[command]:
                        wrong.append(f"{page.relative_to(root)}: vfm {command} {flag}  ({span.strip()[:120]})")
    assert named > 200, f"the scan found only {named} options: the pattern no longer matches the pages"
    assert wrong == []
