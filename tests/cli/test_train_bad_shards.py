"""``vfm train`` on damaged shards: one ``error:`` line naming the shard and exit 1, never a hang or a
raw tarfile / json traceback; a bad first sample is skipped by the probe that sizes the model."""

from __future__ import annotations

import json
import shutil
import tarfile
import warnings

import pytest
from typer.testing import CliRunner

from tests.cli.test_train_shards import IMAGE, _write_bucket, shard_config
from tests.data.helpers import quiet, rewrite_shard
from vfm_cli.main import app
from vfm_data import prepare_dataset


def _toml(table: dict, name: str = "") -> str:
    """Nested tables of scalars, strings and lists (JSON spells those values as TOML does)."""
    head = f"[{name}]\n" if name else ""
    values = "".join(f"{k} = {json.dumps(v)}\n" for k, v in table.items() if not isinstance(v, dict))
    subtables = "".join(_toml(v, f"{name}.{k}" if name else k) for k, v in table.items() if isinstance(v, dict))
    return head + values + subtables


def _config(tmp_path, folder, **train):
    cfg = shard_config(tmp_path / "run", "", data={"blend": "", "shards": [str(folder)]}, train=train)
    path = tmp_path / "train.toml"
    path.write_text(_toml(cfg))
    return path


def _train(*args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CliRunner().invoke(app, ["train", *map(str, args)])


@pytest.mark.timeout(120)
def test_a_shard_without_json_members_stops_training_with_one_line_naming_it(tmp_path):
    _write_bucket(tmp_path, "i", IMAGE, 24, seed=2)
    shards = sorted((tmp_path / "i").glob("*.tar"))
    assert len(shards) >= 3
    rewrite_shard(shards[1], lambda name, data: None if name.endswith(".json") else data)
    shutil.rmtree(tmp_path / "i" / ".nv-meta")
    quiet(prepare_dataset, tmp_path / "i")
    result = _train(_config(tmp_path, tmp_path / "i", steps=40))
    assert result.exit_code == 1, result.output
    assert f"shard {tmp_path}/i/{shards[1].name} has no decodable sample" in result.output
    assert "Traceback" not in result.output


@pytest.mark.timeout(120)
def test_validate_skips_a_bad_first_sample_and_names_a_garbage_shard(tmp_path):
    _write_bucket(tmp_path, "i", IMAGE, 8, seed=2)
    first = sorted((tmp_path / "i").glob("*.tar"))[0]
    rewrite_shard(first, lambda name, data: b"{not json" if name == "i000.json" else data)
    config = _config(tmp_path, tmp_path / "i")
    result = _train(config, "--validate")
    assert result.exit_code == 0 and "valid" in result.output, result.output
    first.write_bytes(b"\x17" * first.stat().st_size)
    result = _train(config, "--validate")
    assert result.exit_code == 1
    assert f"shard {tmp_path}/i/{first.name} does not start with a tar header" in result.output
    assert "Traceback" not in result.output


@pytest.mark.timeout(120)
def test_skipped_samples_are_counted_in_the_training_metrics(tmp_path):
    _write_bucket(tmp_path, "i", IMAGE, 16, seed=2)
    for shard in sorted((tmp_path / "i").glob("*.tar")):  # one bad sample per shard, the rest good
        first = f"{tarfile.open(shard).getnames()[0].split('.')[0]}.json"
        rewrite_shard(shard, lambda name, data, first=first: b"[]" if name == first else data)
    config = _config(tmp_path, tmp_path / "i", steps=4)
    result = _train(config)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["data_corrupt"] >= 1 and rows[-1]["data_skipped"] == rows[-1]["data_corrupt"]
