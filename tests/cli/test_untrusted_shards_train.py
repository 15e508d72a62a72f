"""``vfm train`` (and ``--validate``) on a shard folder from someone else whose ``.nv-meta`` names a
shard outside the folder: refused with exit 1, naming the file and the key, before a sample of the
named shard is read (energon would have trained on it; docs/security.md)."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from tests.cli.test_train_shards import shards  # noqa: F401 - the fixture: real vfm-data shards + blend.yaml
from tests.cli.test_train_trust import _train


@pytest.fixture
def crafted(shards, tmp_path):  # noqa: F811
    """A copy of the shards whose video bucket lists the image bucket's first shard as its own."""
    root = shutil.copytree(shards[0], tmp_path / "shards")
    meta = root / "v" / ".nv-meta"
    outside = "../i/" + sorted(p.name for p in (root / "i").glob("*.tar"))[0]
    info = json.loads((meta / ".info.json").read_text())
    info["shard_counts"][outside] = 1
    (meta / ".info.json").write_text(json.dumps(info))
    split = yaml.safe_load((meta / "split.yaml").read_text())
    split["split_parts"]["train"].append(outside)
    (meta / "split.yaml").write_text(yaml.safe_dump(split))
    return root / "blend.yaml", outside


@pytest.mark.parametrize("args", [("--validate",), ()], ids=["validate", "train"])
def test_train_refuses_a_shard_name_outside_its_folder(tmp_path, crafted, args):
    blend, outside = crafted
    result = _train(tmp_path, blend, *args)
    assert result.exit_code == 1, result.output
    assert "config key 'data.blend'" in result.output
    assert f"v/.nv-meta/.info.json: shard_counts.{outside}: shard name '{outside}' points outside the dataset folder" \
        in " ".join(result.output.split()), result.output
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").rglob("step_*"))
