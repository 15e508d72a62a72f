"""The training recipe (vfm_cli.recipe) resolves a config once per ``vfm train`` run: the shards'
first samples, which size the model, are read once per dataset, not again when the parts are built."""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.cli.test_train_bad_shards import _toml
from tests.cli.test_train_shards import shard_config, shards  # noqa: F401 - the module-scoped shards fixture
from vfm_cli.main import app


@pytest.mark.timeout(120)
def test_vfm_train_reads_each_datasets_first_sample_once(shards, tmp_path, monkeypatch):  # noqa: F811
    import vfm_data.sample

    root, _ = shards
    reads: Counter = Counter()
    real = vfm_data.sample.first_sample

    def counted(folder, **kwargs):
        reads[Path(folder).name] += 1
        return real(folder, **kwargs)

    monkeypatch.setattr(vfm_data.sample, "first_sample", counted)
    config = tmp_path / "train.toml"
    config.write_text(_toml(shard_config(tmp_path / "run", root / "blend.yaml", train={"steps": 1})))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = CliRunner().invoke(app, ["train", str(config)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "run" / "checkpoints").is_dir()  # the run trained, from parts built after validation
    assert reads == {"v": 1, "i": 1}  # the blend's two datasets, each probed once for the whole run
