"""``vfm train`` reaches what vfm-data and vfm-parallel offer beyond its defaults: ``data.blender`` /
``data.blender_options`` pick any registered blender (the built-in scheduled one, a plugin's), and
``parallel.strategy_options`` hands options to the chosen strategies; a misspelt name or option is a
config error naming what is accepted, before the run starts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from tests.cli.test_train_shards import run, shard_config, shards  # noqa: F401 - the module's shard fixture
from vfm_cli import recipe
from vfm_cli.main import app
from vfm_cli.recipe.loaders import shard_loader
from vfm_parallel.trainer import ConfigError, from_dict
from vfm_parallel.trainer.distributed import Coordinates
from vfm_parallel.trainer.parts import RunContext

PACKED = {"packing": True, "max_seq_len": 64}
ONE_RANK = Coordinates.of(0, {"pp": 1, "dp_replicate": 1, "dp_shard": 1, "cp": 1, "tp": 1})
TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny.toml"


def _validate_synthetic(tmp_path, blender: str):
    """``vfm train configs/tiny.toml --validate`` on synthetic data with ``data.blender`` set."""
    sets = ["--set", f"train.out_dir={tmp_path / 'run'}", "--set", "data.source=synthetic", "--set", f"data.blender={blender}"]
    return CliRunner().invoke(app, ["train", str(TINY), *sets, "--validate"])


def _keys(cfg: dict, steps: int = 6) -> list[str]:
    parsed = from_dict(cfg)
    loader = shard_loader(parsed, RunContext(ONE_RANK, torch.device("cpu"), parsed), recipe.validate(parsed))
    keys = [key for _, batch in zip(range(steps), loader) for key in batch["keys"]]
    loader.loader.close()
    return keys


def test_a_scheduled_blend_from_the_config_draws_what_its_schedule_says(shards, tmp_path):  # noqa: F811
    root, _ = shards  # datasets in blend order: "v" (2-frame videos), then "i" (images)
    only = lambda weights: shard_config(tmp_path / "run", root / "blend.yaml", data={  # noqa: E731
        **PACKED, "blender": "scheduled", "blender_options": {"schedule": [[0, weights]]}})
    assert {key[0] for key in _keys(only([1.0, 0.0]))} == {"v"}
    assert {key[0] for key in _keys(only([0.0, 1.0]))} == {"i"}
    result = run(only([1.0, 1.0]))
    assert len(result.losses) == 6


def test_an_unknown_blender_or_blender_option_is_a_config_error_naming_what_is_accepted(shards, tmp_path):  # noqa: F811
    root, _ = shards
    cfg = shard_config(tmp_path / "run", root / "blend.yaml", data={"blender": "shuffled"})
    with pytest.raises(ConfigError, match=r"data.blender.*unknown blender 'shuffled'; available: .*bucketed.*scheduled"):
        recipe.validate(from_dict(cfg))
    cfg = shard_config(tmp_path / "run", root / "blend.yaml", data={**PACKED, "blender": "scheduled",
                                                                   "blender_options": {"schedul": []}})
    with pytest.raises(ConfigError, match=r"data.blender_options.schedul.*accepted: schedule"):
        recipe.validate(from_dict(cfg))
    cfg = shard_config(tmp_path / "run", root / "blend.yaml", data={**PACKED, "blender": "bucketed"})
    with pytest.raises(ConfigError, match=r"data.blender.*'bucketed' stacks .* does not pack: with data.packing = true"):
        recipe.validate(from_dict(cfg))  # not vfm-data's ValueError when the run builds its loader
    for data, said in (({**PACKED, "blender": "scheduled", "blender_options": {"schedule": "abc"}}, "'scheduled' refuses"),
                       ({"blender_options": {"durations": ["x"]}}, "'bucketed' refuses")):
        cfg = shard_config(tmp_path / "run", root / "blend.yaml", data=data)
        with pytest.raises(ConfigError, match=f"data.blender_options.*{said}"):  # values too, not a traceback in the run
            recipe.validate(from_dict(cfg))


def test_validate_names_an_unknown_blender_and_the_accepted_ones_with_synthetic_data_too(tmp_path):
    # synthetic data uses no blender, but the name is a typo the same config on shards would meet later
    unknown = _validate_synthetic(tmp_path, "shufled")
    assert unknown.exit_code == 1
    assert ("error: config key 'data.blender': unknown blender 'shufled'; available: bucketed, scheduled, weighted"
            in unknown.output)
    known = _validate_synthetic(tmp_path, "weighted")
    assert known.exit_code == 0, known.output


def test_strategy_options_reach_the_strategy(shards, tmp_path):  # noqa: F811
    root, _ = shards
    base = shard_config(tmp_path / "a", root / "blend.yaml", train={"steps": 3})
    plain = run(base)
    compiled = run({**base, "train": {**base["train"], "out_dir": str(tmp_path / "b")},
                    "parallel": {"compile": True, "strategy_options": {"compile": {"backend": "eager"}}}})
    assert compiled.losses == pytest.approx(plain.losses, rel=1e-6)  # eager backend: the same arithmetic
    bad = {**base, "train": {**base["train"], "out_dir": str(tmp_path / "c")},
           "parallel": {"compile": True, "strategy_options": {"compile": {"backend": "no-such-backend"}}}}
    with pytest.raises(Exception, match="no-such-backend"):  # torch.compile got it
        run(bad)


def test_a_misspelt_strategy_option_or_one_for_an_unused_strategy_is_named(shards, tmp_path):  # noqa: F811
    root, _ = shards
    base = shard_config(tmp_path / "run", root / "blend.yaml", train={"steps": 1})
    with pytest.raises(ConfigError, match=r"strategy_options.fsdp.*has no option reshard_after_forwrd; accepted: "
                                          r"param_dtype, reduce_dtype, cpu_offload, reshard_after_forward"):
        run({**base, "parallel": {"strategies": ["fsdp"], "strategy_options": {"fsdp": {"reshard_after_forwrd": False}}}})
    with pytest.raises(ConfigError, match=r"strategy_options.fsdp.*a strategy this run does not use; it uses: \(none\)"):
        run({**base, "parallel": {"strategy_options": {"fsdp": {"reshard_after_forward": False}}}})
    with pytest.raises(ConfigError, match=r"strategy_options.ac.*parallel.activation_checkpointing"):
        from_dict({**base, "parallel": {"strategy_options": {"ac": {"mode": "full"}}}})


def test_strategy_options_are_checked_with_the_layout_before_any_rank_starts(shards, tmp_path):  # noqa: F811
    root, _ = shards  # what `vfm train` and `vfm train --validate` check before torchrun's ranks build anything
    base = shard_config(tmp_path / "run", root / "blend.yaml", train={"steps": 1})
    misspelt = {**base, "parallel": {"strategies": ["fsdp"], "strategy_options": {"fsdp": {"reshard_after_forwrd": False}}}}
    with pytest.raises(ConfigError, match=r"strategy_options.fsdp.*has no option reshard_after_forwrd"):
        recipe.validate(from_dict(misspelt, 2), 2)
    unused = {**base, "parallel": {"strategy_options": {"compile": {"mode": "max-autotune"}}}}
    with pytest.raises(ConfigError, match=r"strategy_options.compile.*does not use; it uses: fsdp"):
        recipe.validate(from_dict(unused, 2), 2)


def test_validate_names_a_blender_missing_a_required_option_once(tmp_path):
    missing = _validate_synthetic(tmp_path, "scheduled")
    assert missing.exit_code == 1
    assert "needs the option schedule, not given" in missing.output
    assert missing.output.count("blender 'scheduled'") == 1, missing.output


def test_a_token_budget_in_blender_options_replaces_the_micro_batch_of_the_default_bucketed_blender(shards, tmp_path):  # noqa: F811
    """data.blender_options = {tokens_per_batch = N} with the default blender got micro_batch as well:
    'give exactly one of tokens_per_batch or batch_size'."""
    root, _ = shards
    cfg = shard_config(tmp_path / "run", root / "blend.yaml", data={"blender_options": {"tokens_per_batch": 64}})
    assert len(_keys(cfg, steps=3)) >= 3
