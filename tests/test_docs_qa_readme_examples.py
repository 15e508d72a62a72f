"""The packages' README examples that need nothing but the package run exactly as printed, each in a
fresh process and an empty folder (what a reader who pastes them into a file gets)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: (README, the first line of its python block): blocks meant to run as they are
SELF_CONTAINED = [
    ("packages/vfm-models/README.md", "import torch\nimport vfm_models\n"),
    ("packages/vfm-models/README.md", "import torch, vfm_models\n"),
    ("packages/vfm-data/README.md", "import torch\nfrom vfm_data import"),
    ("packages/vfm-parallel/README.md", "from vfm_parallel.planner import"),
    ("packages/vfm-infer/README.md", "import torch, vfm_infer, vfm_models\n"),
]


def python_blocks(readme: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", (ROOT / readme).read_text(encoding="utf-8"), re.M | re.S)


@pytest.mark.parametrize(("readme", "start"), SELF_CONTAINED, ids=[f"{r.split('/')[1]}-{i}" for i, (r, _) in enumerate(SELF_CONTAINED)])
def test_readme_example_runs_as_printed(readme, start, tmp_path):
    blocks = [b for b in python_blocks(readme) if b.startswith(start)]
    assert len(blocks) == 1, f"{readme}: expected one python block starting {start!r}, found {len(blocks)}"
    script = tmp_path / "example.py"
    script.write_text(blocks[0], encoding="utf-8")
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{readme} example failed:\n{result.stderr[-3000:]}"


def test_the_tokenizer_example_prints_the_shape_its_comment_states(tmp_path):
    block = next(b for b in python_blocks("packages/vfm-models/README.md") if b.startswith(SELF_CONTAINED[0][1]))
    script = tmp_path / "example.py"
    script.write_text(block + "print(tuple(latent.shape))\n", encoding="utf-8")
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    stated = re.search(r"-> \(([\d, ]+)\)", block).group(1)
    assert result.stdout.strip().splitlines()[-1] == f"({stated})"
