"""The training config: validation names the key and the reason; ``--set`` overrides; LR schedule."""

from __future__ import annotations

import math

import pytest

from vfm_parallel.trainer.config import ConfigError, apply_overrides, from_dict, load, parse_override
from vfm_parallel.trainer.schedule import lr_at

BASE = {"model": {"family": "dit"}, "data": {"source": "synthetic"}, "train": {"steps": 10}}


def _with(section: str, **values) -> dict:
    return apply_overrides(BASE, [f"{section}.{k}={v}" for k, v in values.items()])


@pytest.mark.parametrize(
    "data, key, reason",
    [
        (_with("optim", lr=-1), "optim.lr", "must be > 0"),
        (_with("optim", warmup_steps=20), "optim.warmup_steps", "more than train.steps"),
        (_with("optim", lrr=1), "optim.lrr", "unknown key (did you mean lr?); accepted: name, lr"),
        (_with("optim", zzz=1), "optim.zzz", "unknown key; accepted: name, lr"),  # nothing close: no guess
        (_with("data", source='"web"'), "data.source", "must be one of shards, synthetic"),
        (_with("ema", decay=1.5), "ema.decay", "must be in [0, 1)"),
        (_with("parallel", tp='"two"'), "parallel.tp", "expected int, got str"),
        (_with("logging", tensorboard=1), "logging.tensorboard", "expected bool, got int"),
        (_with("data", source='"shards"'), "data", "needs data.blend or data.shards"),
        (_with("data", packing="true"), "data.max_seq_len", "packing needs max_seq_len > 0"),
        ({**BASE, "optimizer": {}}, "optimizer", "unknown key (did you mean optim?); accepted: model, parallel"),
    ],
)
def test_a_bad_config_is_rejected_naming_the_key_and_the_reason(data, key, reason):
    with pytest.raises(ConfigError) as info:
        from_dict(data)
    assert info.value.key == key
    assert reason in str(info.value)


def test_the_mesh_must_multiply_to_the_world_size():
    data = _with("parallel", tp=2, cp=2, dp_shard=1)
    with pytest.raises(ConfigError, match=r"1\*1\*1\*2\*2 = 4 but the world size is 8"):
        from_dict(data, world_size=8)
    assert from_dict(data, world_size=4).parallel.resolved(4)["tp"] == 2


def test_dp_shard_minus_one_fills_the_remaining_ranks():
    cfg = from_dict(_with("parallel", tp=2), world_size=8)
    assert cfg.parallel.resolved(8) == {"pp": 1, "dp_replicate": 1, "dp_shard": 4, "cp": 1, "tp": 2}


def test_set_overrides_parse_values_as_toml_and_bare_words_as_strings():
    assert parse_override("optim.lr=1e-4") == (["optim", "lr"], 1e-4)
    assert parse_override("parallel.strategies=['tp', 'fsdp']") == (["parallel", "strategies"], ["tp", "fsdp"])
    assert parse_override("model.family=dit-cross") == (["model", "family"], "dit-cross")
    cfg = from_dict(apply_overrides(BASE, ["optim.lr=1e-4", "model.options.depth=3", "ema.enabled=false"]))
    assert cfg.optim.lr == 1e-4 and cfg.model.options == {"depth": 3} and cfg.ema.enabled is False
    with pytest.raises(ConfigError, match="section.key=value"):
        parse_override("optim.lr")


def test_load_reads_toml_and_reports_a_missing_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[model]\nfamily = "dit"\n[data]\nsource = "synthetic"\n[optim]\nlr = 2e-4\n')
    assert load(path, ["optim.grad_clip=0.5"]).optim.grad_clip == 0.5
    with pytest.raises(ConfigError, match="no config file"):
        load(tmp_path / "missing.toml")


def test_lr_warms_up_linearly_then_decays_by_cosine_to_the_floor():
    kw = dict(lr=1.0, warmup_steps=4, total_steps=14, min_lr_ratio=0.1)
    assert [lr_at(s, **kw) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert lr_at(4, **kw) == 1.0
    assert lr_at(13, **kw) == pytest.approx(0.1)
    mid = 4 + 9 / 2
    assert lr_at(int(mid), **kw) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 4 / 9)))


def test_the_last_step_runs_at_the_floor_even_right_after_the_warm_up():
    """warmup_steps = steps - 1 leaves one decay step: the run's last, at lr * min_lr_ratio (it ran at the peak)."""
    kw = dict(lr=1.0, warmup_steps=4, total_steps=5, min_lr_ratio=0.1)
    assert [lr_at(s, **kw) for s in range(5)] == pytest.approx([0.25, 0.5, 0.75, 1.0, 0.1])
    assert lr_at(5, lr=1.0, warmup_steps=4, total_steps=6, min_lr_ratio=0.1) == pytest.approx(0.1)


def test_a_misspelt_set_key_suggests_the_close_key_of_its_section():
    with pytest.raises(ConfigError) as info:
        from_dict(apply_overrides(BASE, ["train.step=3"]))
    assert str(info.value).startswith("config key 'train.step': unknown key (did you mean steps?); accepted: steps, "), info.value


def test_a_warmup_longer_than_the_run_is_refused_naming_the_accepted_range():
    with pytest.raises(ConfigError) as info:
        from_dict(_with("optim", warmup_steps=20))
    assert info.value.key == "optim.warmup_steps"
    assert str(info.value).endswith("20 is more than train.steps = 10; accepted: 0 to 10 (warmup_steps <= train.steps)")
    assert from_dict(_with("optim", warmup_steps=10)).optim.warmup_steps == 10
