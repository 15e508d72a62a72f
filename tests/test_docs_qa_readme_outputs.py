"""Following the READMEs from the repository root leaves `git status` clean: every file and folder
their commands write (``-o curated``, ``--write-block parallel.toml``, ``cat > finetune.toml``, the
vfm-data example's ``data/`` and ``blend.yaml``) is in .gitignore, and no source is."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
READMES = ["README.md", "packages/vfm-data/README.md"]

pytestmark = pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                                reason="needs a git checkout")

FOLDER_OPTIONS = re.compile(r"(?:^|\s)(?:-o|--out)\s+(\S+)")  # vfm commands write folders there
FILE_OPTIONS = re.compile(r"(?:--write-block|--profile-out)\s+([^\s\]]+)|\bcat\s+>\s*(\S+)")
PYTHON_WRITES = re.compile(r"(?:ShardWriter|write_blend)\(\"([^\"]+)\"")


def written_paths() -> set[str]:
    """Paths in the checkout the README examples write (a folder's as ``name/x``), inputs left out."""
    paths = set()
    for readme in READMES:
        text = (ROOT / readme).read_text(encoding="utf-8")
        for block in re.findall(r"^```(?:bash|python)\n(.*?)^```$", text, re.M | re.S):
            for line in block.splitlines():
                line = line.split("#", 1)[0] if not line.lstrip().startswith(("#", "cat ")) else line
                paths |= {f"{m}/x" for m in FOLDER_OPTIONS.findall(line)}
                paths |= {a or b for a, b in FILE_OPTIONS.findall(line)}
                paths |= set(PYTHON_WRITES.findall(line))
            paths |= {f"{m}/x" for m in re.findall(r'^out_dir = "([^"]+)"', block, re.M)}
    return {p for p in paths if not p.startswith(("/", "~", "$"))}


def ignored(path: str) -> bool:
    return subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT).returncode == 0


def test_what_the_readme_commands_write_is_ignored():
    paths = written_paths()
    # the parser finds what the README writes today: each command of "The commands" and the fine-tune recipe
    assert {"curated/x", "shards/x", "videos/x", "exports/dit-xl/x", "parallel.toml", "finetune.toml",
            "runs/dit-xl-finetune/x", "data/videos", "blend.yaml"} <= paths, paths
    assert [p for p in sorted(paths) if not ignored(p)] == []
    # and only outputs: no file of the repository matches an ignore pattern
    tracked = subprocess.run(["git", "ls-files", "-ci", "--exclude-standard"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    assert tracked == []
