"""``vfm train`` (and ``--validate``) refuses a blend whose YAML names code, naming the file and the
key, and runs nothing; ``--trust-dataset-code`` is the opt-in (docs/security.md)."""

from __future__ import annotations

import shutil

import pytest
import yaml
from typer.testing import CliRunner

from tests.cli.test_train_shards import shards  # noqa: F401 - the fixture: real vfm-data shards + blend.yaml
from vfm_cli.main import app

CONFIG = """
[model]
family = "dit-cross"
preset = "tiny"
options = {{ patch = [1, 2, 2] }}
[data]
source = "shards"
blend = "{blend}"
micro_batch = 2
[train]
steps = 2
out_dir = "{out}"
[checkpoint]
export = false
[logging]
tensorboard = false
loss_curve = false
progress = false
peak_tflops = 1.0
"""


@pytest.fixture
def crafted(shards, tmp_path):  # noqa: F811
    """A copy of the shards whose blend.yaml has a subflavor that would run ``touch MARKER``."""
    root = shutil.copytree(shards[0], tmp_path / "shards")
    marker = tmp_path / "marker"
    doc = yaml.safe_load((root / "blend.yaml").read_text())
    doc["splits"]["train"]["blend"][0]["subflavors"] = {
        "x": {"__module__": "subprocess", "__function__": "run", "args": ["touch", str(marker)]}}
    (root / "blend.yaml").write_text(yaml.safe_dump(doc))
    return root / "blend.yaml", marker


def _train(tmp_path, blend, *args: str):
    config = tmp_path / "train.toml"
    config.write_text(CONFIG.format(blend=blend, out=tmp_path / "run"))
    return CliRunner().invoke(app, ["train", str(config), *args])


@pytest.mark.parametrize("args", [("--validate",), ()], ids=["validate", "train"])
def test_train_refuses_a_blend_naming_code_and_runs_nothing(tmp_path, crafted, args):
    blend, marker = crafted
    result = _train(tmp_path, blend, *args)
    assert result.exit_code == 1, result.output
    assert "config key 'data.blend'" in result.output
    assert "blend.yaml: splits.train.blend[0].subflavors.x: names the Python object subprocess.run" in result.output
    assert ": valid" not in result.output
    assert not marker.exists()


def test_trust_dataset_code_validates_ordinary_shards_with_a_warning(tmp_path, shards):  # noqa: F811
    result = _train(tmp_path, shards[0] / "blend.yaml", "--validate", "--trust-dataset-code")
    assert result.exit_code == 0, result.output
    assert "warning: trusting the dataset code" in result.output  # one line, as vfm shows its own warnings
    assert result.output.strip().endswith("valid")
