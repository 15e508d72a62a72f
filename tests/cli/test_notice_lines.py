"""vfm's own warnings (``vfm_plugins.Notice``: from vfm-data, the trainer, plugins, generation) reach
the user of a ``vfm`` command as one ``warning:`` line each, never Python's ``file:line: UserWarning``
with a source line; other libraries' warnings keep Python's form."""

from __future__ import annotations

import warnings

import pytest
from typer.testing import CliRunner

from tests.cli.test_train_bad_shards import _config
from tests.cli.test_train_shards import IMAGE, _write_bucket
from tests.data.helpers import quiet, rewrite_shard
from vfm_cli.main import app
from vfm_data import prepare_dataset
from vfm_plugins import Notice


@pytest.mark.timeout(120)
def test_a_skipped_sample_during_vfm_train_is_one_warning_line(tmp_path):
    _write_bucket(tmp_path, "i", IMAGE, 16, seed=2)
    shard = sorted((tmp_path / "i").glob("*.tar"))[1]
    corrupted: list[str] = []

    def corrupt_first_json(name, data):  # one sample of the shard; the others still train
        if name.endswith(".json") and not corrupted:
            corrupted.append(name)
            return b"{not json"
        return data

    rewrite_shard(shard, corrupt_first_json)
    quiet(prepare_dataset, tmp_path / "i")
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        result = CliRunner().invoke(app, ["train", str(_config(tmp_path, tmp_path / "i", steps=4))])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "vfm_data:" in line]
    assert lines and all(line.startswith("warning: vfm_data: skipped") for line in lines), result.output
    assert "UserWarning" not in result.output and "DataWarning" not in result.output
    assert "warnings.warn(" not in result.output


def test_every_vfm_package_warning_class_is_a_notice():
    from vfm_data.errors import DataWarning
    from vfm_infer.checks import GenerationWarning
    from vfm_parallel.trainer import TrainingWarning
    from vfm_plugins import PluginWarning, StaleLockWarning

    for category in (DataWarning, GenerationWarning, TrainingWarning, PluginWarning, StaleLockWarning):
        assert issubclass(category, Notice), category
    assert issubclass(TrainingWarning, RuntimeWarning) and issubclass(DataWarning, UserWarning)  # as before
