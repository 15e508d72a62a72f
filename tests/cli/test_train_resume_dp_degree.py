"""Resuming a shard run under another data-parallel degree: vfm-data's loader keeps one position per
DP rank and cannot continue them under another degree, so the refusal may not offer
``checkpoint.allow_changes = ["layout"]`` (which then failed at the loader), and names the layouts
that do continue the run: the same DP degree with the other processes on tp, cp or pp."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tests.cli.test_train_shards import _write_bucket, VIDEO
from tests.cli.train_configs import tiny_shards_train
from vfm_cli.main import app


@pytest.fixture(scope="module")
def one_process_checkpoint(tmp_path_factory):
    """A shard run of one process (DP degree 1) stopped at its step-1 checkpoint."""
    from vfm_data import write_blend

    root = tmp_path_factory.mktemp("dp_degree")
    _write_bucket(root, "v", VIDEO, 8, seed=1)
    write_blend(root / "blend.yaml", [(root / "v", 8)])
    config = root / "train.toml"
    config.write_text(tiny_shards_train())
    out = root / "run"
    first = _train(config, root, out, "train.steps=3", "train.stop_at=1")
    assert first.exit_code == 0, first.output
    return config, root, out


def _train(config, root, out, *items, validate=False, world_size=None):
    sets = [f"data.blend={root / 'blend.yaml'}", f"train.out_dir={out}", "train.steps=3", *items]
    args = ["train", str(config), *[a for item in sets for a in ("--set", item)]]
    if validate:
        args += ["--validate", "--world-size", str(world_size)]
    return CliRunner().invoke(app, args)


def test_a_shard_checkpoint_under_another_dp_degree_is_refused_naming_the_layout_that_continues_it(one_process_checkpoint):
    config, root, out = one_process_checkpoint
    for allowed in ([], ['checkpoint.allow_changes=["batch", "layout"]']):  # the old refusal's advice
        result = _train(config, root, out, *allowed, validate=True, world_size=2)
        assert result.exit_code == 1, result.output
        errors = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, result.output
        assert "data-parallel degree (parallel.dp_replicate x dp_shard) 1, this run has 2" in errors[0]
        assert "--set parallel.dp_shard=1 --set parallel.tp=2" in errors[0]
        assert "To resume anyway" not in errors[0]  # no allow_changes accepts it


def test_a_shard_checkpoint_under_the_same_dp_degree_on_more_processes_is_accepted(one_process_checkpoint):
    config, root, out = one_process_checkpoint
    result = _train(config, root, out, "parallel.dp_shard=1", "parallel.tp=2", validate=True, world_size=2)
    assert result.exit_code == 0, result.output
    assert "resumes from step 1" in result.output
