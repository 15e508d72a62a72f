"""A plugin class that is defined wrongly (a stage with no method that does its work, a family whose
model has no parallel plan, a preset with a key its config lacks) is one ``error:`` line from ``vfm``
naming the plugin's class and what to define, before any work: real ``vfm`` process, real entry points."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import plugin_env
from tests.plugins.conftest import vfm, write_plugin


def test_vfm_curate_refuses_a_plugin_stage_without_process_in_one_line_before_any_work(tmp_path):
    from vfm_curator.synth import make_video

    plugin = write_plugin(tmp_path / "plugin", "vfm-author-norun", {"author_norun": """
        from vfm_curator.plugins import hookimpl
        from vfm_curator.stages.base import Resources, Stage

        class MinLength(Stage):
            name = "min-length"
            resources = Resources(cpus=0.25, memory_mb=128)
            defaults = {"min_frames": 40}

            def process_clip(self, task):  # meant as process_one: no runner calls it
                task.clips = [c for c in task.clips if c.end - c.start >= self.opt["min_frames"]]

        @hookimpl
        def vfm_curator_register_stages(register):
            register("min-length", MinLength)
    """}, {"vfm_curator": "author_norun"})
    make_video(tmp_path / "raw" / "a.mp4", [30, 30])
    (tmp_path / "run.toml").write_text('stages = ["decode", "split", "transcode", "min-length", "write"]\n'
                                       '[run]\nrunner = "serial"\n')
    out = tmp_path / "out"
    result = vfm("curate", str(tmp_path / "raw"), "-o", str(out), "--config", str(tmp_path / "run.toml"),
                 env=plugin_env([plugin]))
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        "error: stage 'min-length' (class author_norun.MinLength) defines neither process_one nor process: define "
        "process_one(self, task) to work on one task in place, or process(self, tasks) returning the tasks for real "
        "batching (MinLength has process_clip: rename it?)"]
    assert not out.exists()  # refused before the folder was made, locked or any video decoded


FAMILY_MODULE = """
    from dataclasses import dataclass

    from vfm_models.blocks.transformer import DiTBlock
    from vfm_models.families import ModelFamily
    from vfm_models.families.base import DiffusionTransformer
    from vfm_models.families.config import TransformerConfig
    from vfm_models.families.plan import transformer_plan

    @dataclass
    class AuthorConfig(TransformerConfig):
        num_classes: int = 10

    class AuthorDiT(DiffusionTransformer):
        block_cls = DiTBlock
    {plan}
    FAMILY = ModelFamily(name="author-dit", config_cls=AuthorConfig, build=AuthorDiT, presets={{"tiny": {preset}}})
"""
PLAN = """
        def parallel_plan(self):
            return transformer_plan(self, {"attn.core": "full"})
"""
REGISTER = """
    from vfm_models.plugins import hookimpl

    @hookimpl
    def vfm_models_register_families(register):
        register("author-dit", "author_family:FAMILY")
"""


def write_config(tmp_path, family: str, options: str = ""):
    """A tiny synthetic-data training config of ``family`` (its preset ``tiny``, with ``options``)."""
    config = tmp_path / "run.toml"
    config.write_text(f'[model]\nfamily = "{family}"\npreset = "tiny"\noptions = {{ {options} }}\n'
                      '[data]\nsource = "synthetic"\nlatent_shape = [3, 2, 8, 8]\n'
                      f'[train]\nout_dir = "{tmp_path / "run"}"\n')
    return config


def train_validate(tmp_path, *, plan: str, preset: str, options: str = "") -> list[str]:
    """``vfm train --validate`` of a tiny config naming the plugin's family; its stderr lines."""
    plugin = write_plugin(tmp_path / "plugin", "vfm-author-family", {
        "author_family": FAMILY_MODULE.format(plan=plan, preset=preset),
        "author_models": REGISTER}, {"vfm_models": "author_models"})
    config = write_config(tmp_path, "author-dit", options)
    result = vfm("train", str(config), "--validate", env=plugin_env([plugin]))
    assert result.returncode == (0 if not result.stderr else 1), result.stdout + result.stderr
    return result.stderr.splitlines()


def test_vfm_train_validate_refuses_a_family_model_without_parallel_plan_in_one_line(tmp_path):
    lines = train_validate(tmp_path, plan="", preset='dict(hidden=32, depth=2, num_heads=2, patch=(1, 2, 2))')
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: family 'author-dit' builds author_family.AuthorDiT, which does not define "
                               "parallel_plan(): define parallel_plan(self) in AuthorDiT returning a "
                               "vfm_models.families.plan.ParallelPlan"), lines
    assert train_validate(tmp_path / "fixed", plan=PLAN, preset='dict(hidden=32, depth=2, num_heads=2, patch=(1, 2, 2))') == []


def test_vfm_train_blames_a_bad_preset_key_on_the_plugin_and_a_bad_option_on_the_config(tmp_path):
    lines = train_validate(tmp_path / "preset", plan=PLAN, preset="dict(hidden=32, depth=2, num_heads=2, heads=2)")
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        "error: family 'author-dit' (from vfm-author-family 0.0.1): its preset 'tiny' sets heads, which its config "
        "class author_family.AuthorConfig has no field for (a bug in the family's plugin, not in your options)"), lines
    lines = train_validate(tmp_path / "options", plan=PLAN, preset="dict(hidden=32, depth=2, num_heads=2)",
                           options="heads = 2")
    assert len(lines) == 1 and lines[0].startswith(
        "error: config key 'model.options': family 'author-dit' has no config key(s) heads (did you mean num_heads?); "
        "keys: "), lines
    assert "num_heads" in lines[0] and "preset" not in lines[0]


PLAIN_FAMILY = """
    from torch import nn
    from vfm_models.families import ModelFamily
    from vfm_models.families.config import TransformerConfig

    class PlainNet(nn.Module):  # a plain module, not a DiffusionTransformer: no parallel_plan to inherit
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.proj = nn.Linear(config.hidden, config.hidden)

    FAMILY = ModelFamily(name="plain-net", config_cls=TransformerConfig, build=PlainNet,
                         presets={"tiny": dict(hidden=32, depth=2, num_heads=2, patch=(1, 2, 2))})
"""


def test_vfm_train_and_plan_refuse_a_plain_module_family_without_parallel_plan_in_one_line(tmp_path):
    plugin = write_plugin(tmp_path / "plugin", "vfm-plain-family", {
        "plain_family": PLAIN_FAMILY,
        "plain_models": REGISTER.replace("author-dit", "plain-net").replace("author_family", "plain_family")},
        {"vfm_models": "plain_models"})
    config = write_config(tmp_path, "plain-net")
    expected = ("error: family 'plain-net' builds plain_family.PlainNet, which does not define parallel_plan(): "
                "define parallel_plan(self) in PlainNet returning a vfm_models.families.plan.ParallelPlan")
    for args in (("train", str(config), "--validate"), ("plan", str(config), "--gpus", "2")):
        result = vfm(*args, env=plugin_env([plugin]))
        assert result.returncode == 1, result.stdout + result.stderr
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(expected), (args[0], lines)
        # transformer_plan needs DiffusionTransformer's parts: a plain module is shown ParallelPlan's own fields
        assert "return ParallelPlan(blocks=" in lines[0], lines


def test_a_missing_parallel_plan_names_the_family_that_builds_the_class_not_others_sharing_its_config(plugin):
    import vfm_models
    from vfm_models.families.plan import ParallelPlanMissingError, parallel_plan_of

    plugin("vfm-plain-families", {"plain_family": PLAIN_FAMILY + """
    class OtherNet(PlainNet):
        def parallel_plan(self):
            return None

    OTHER = ModelFamily(name="other-net", config_cls=TransformerConfig, build=OtherNet, presets=FAMILY.presets)
""", "plain_models": """
    from vfm_models.plugins import hookimpl

    @hookimpl
    def vfm_models_register_families(register):
        register("plain-net", "plain_family:FAMILY")
        register("other-net", "plain_family:OTHER")
"""}, {"vfm_models": "plain_models"})
    with torch.device("meta"):
        model = vfm_models.get_family("plain-net").create("tiny")
    with pytest.raises(ParallelPlanMissingError) as err:
        parallel_plan_of(model)
    assert str(err.value).startswith("family 'plain-net' builds plain_family.PlainNet, which does not define "), err.value


def test_vfm_train_and_plan_name_a_family_whose_build_returns_no_module(tmp_path):
    # a factory `build` that returns something else: the error told the author to define parallel_plan() in str
    plugin = write_plugin(tmp_path / "plugin", "vfm-nomodule-family", {
        "nomodule_family": PLAIN_FAMILY.replace("build=PlainNet", "build=lambda config: (PlainNet(config), config)"),
        "nomodule_models": REGISTER.replace("author-dit", "plain-net").replace("author_family", "nomodule_family")},
        {"vfm_models": "nomodule_models"})
    config = write_config(tmp_path, "plain-net")
    for args in (("train", str(config), "--validate"), ("plan", str(config), "--gpus", "2")):
        result = vfm(*args, env=plugin_env([plugin]))
        assert result.returncode == 1, result.stdout + result.stderr
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            "error: family 'plain-net' (from vfm-nomodule-family 0.0.1): its build returned a builtins.tuple ((PlainNet("), (args[0], lines)
        assert lines[0].endswith("not an nn.Module; build(config) must return the model"), lines


def test_vfm_train_names_a_family_whose_build_cannot_take_the_config(tmp_path):
    # build() without the config: a TypeError traceback from vfm train, far from the ModelFamily(...) line
    plugin = write_plugin(tmp_path / "plugin", "vfm-noconfig-family", {
        "noconfig_family": PLAIN_FAMILY.replace("build=PlainNet", "build=make_net").replace(
            "    FAMILY = ", "    def make_net():\n        return PlainNet(None)\n\n    FAMILY = "),
        "noconfig_models": REGISTER.replace("author-dit", "plain-net").replace("author_family", "noconfig_family")},
        {"vfm_models": "noconfig_models"})
    result = vfm("train", str(write_config(tmp_path, "plain-net")), "--validate", env=plugin_env([plugin]))
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert lines == [
        "error: family 'plain-net' (from vfm-noconfig-family 0.0.1) cannot be loaded: importing noconfig_family (its "
        "target 'noconfig_family:FAMILY') failed: FamilyDefinitionError: family 'plain-net': build = make_net() cannot "
        "take the config; build(config) is called with the config alone and returns the model (a model class taking "
        "the config, or a function of it)"], lines
