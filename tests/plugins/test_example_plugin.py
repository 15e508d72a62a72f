"""docs/plugins.md's example plugin, installed with pip as a real package (tests/plugin_packages/
vfm-plugin-example): the files the guide shows are the package's files, `vfm plugins` lists what it
adds, and each piece is usable by name from a config or the command line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from tests.conftest import PLUGIN_PACKAGES, plugin_env
from tests.infer.samplers.mixin import ODESamplerTestMixin
from tests.plugins.conftest import vfm

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = PLUGIN_PACKAGES / "vfm-plugin-example"
GUIDE = ROOT / "docs" / "plugins.md"


def test_the_guide_shows_the_example_packages_files_exactly():
    blocks = re.findall(r"^```(?:toml|python)\n# (\S+)\n(.*?)^```$", GUIDE.read_text(), re.M | re.S)
    shown = {path: text for path, text in blocks}
    assert sorted(shown) == sorted(["pyproject.toml", *(f"src/vfm_plugin_example/{m}.py" for m in
                                     ("models", "family", "infer", "curator"))])
    for path, text in shown.items():
        assert text == (PACKAGE / path).read_text(), f"docs/plugins.md's {path} differs from {PACKAGE / path}"


def test_vfm_plugins_lists_the_family_the_sampler_and_the_stage(installed_plugins):
    result = vfm("plugins", "--json", env=plugin_env([installed_plugins("vfm-plugin-example")]))
    assert result.returncode == 0, result.stderr
    rows = {(r["host"], r["kind"], r["name"]): r for r in json.loads(result.stdout)}
    for key in [("vfm_models", "families", "swiglu-dit"), ("vfm_infer", "samplers", "flow-midpoint"),
                ("vfm_curator", "stages", "keep-longest")]:
        assert (rows[key]["provider"], rows[key]["version"], rows[key]["status"]) == ("vfm-plugin-example", "0.1.0", "ok")


class TestExampleSampler(ODESamplerTestMixin):
    """The shared sampler tests (order of convergence on the analytic mixture) run on the plugin's."""

    sampler_name = "flow-midpoint"

    @pytest.fixture(autouse=True)
    def _example_installed(self, with_plugins):
        with_plugins("vfm-plugin-example")

    # On one Gaussian (the mixin's case) the flow velocity is affine in x and the midpoint rule's
    # second-order error term cancels, so it converges at order 3 there (2.99 measured).
    order_slack_above = 1.2


def test_the_family_trains_into_an_export_that_vfm_generate_samples_with_the_plugin_sampler(installed_plugins, tmp_path,
                                                                                            with_plugins):
    with_plugins("vfm-plugin-example")
    import vfm_models
    from vfm_models.export import save_export

    torch.manual_seed(0)
    model = vfm_models.get_family("swiglu-dit").create("tiny", in_channels=3, patch=(1, 2, 2))
    assert model.config.mlp == "swiglu" and model.parallel_plan().num_layers == 2
    formulation = vfm_models.get_formulation("rectified-flow")(shift=2.0)
    x0, cond = torch.randn(2, 3, 2, 8, 8), {"y": torch.tensor([1, 2])}
    formulation.loss(model, x0, cond, torch.Generator().manual_seed(0)).backward()
    save_export(tmp_path / "export", model, {
        "family": "swiglu-dit", "config": model.config, "formulation": "rectified-flow",
        "formulation_options": formulation.options(), "tokenizer": "pixel", "tokenizer_options": {"patch": 1},
        "latent_shape": [3, 2, 8, 8]})
    result = vfm("generate", "--checkpoint", str(tmp_path / "export"), "--prompt", "3", "--sampler", "flow-midpoint",
                 "--steps", "3", "-o", str(tmp_path / "videos"), env=plugin_env([installed_plugins("vfm-plugin-example")]))
    assert result.returncode == 0, result.stderr
    assert "6 denoiser evaluations per video, guidance off: one forward each, sampler FlowMidpoint" in result.stdout
    assert (tmp_path / "videos" / "0000.mp4").stat().st_size > 0


def test_vfm_train_builds_the_family_its_config_names_and_exports_it(installed_plugins, tmp_path):
    # the guide's run.toml snippet, through the real command: config check, build, steps, export
    sets = {"model.family": "swiglu-dit", "model.formulation": "rectified-flow", "train.steps": "2",
            "optim.warmup_steps": "1", "checkpoint.interval": "2", "train.out_dir": str(tmp_path / "run"),
            "logging.tensorboard": "false", "logging.loss_curve": "false", "logging.progress": "false"}
    args = [a for key, value in sets.items() for a in ("--set", f"{key}={value}")]
    result = vfm("train", str(ROOT / "configs" / "tiny.toml"), *args,
                 env=plugin_env([installed_plugins("vfm-plugin-example")]))
    assert result.returncode == 0, result.stderr
    export = json.loads((tmp_path / "run" / "export" / "config.json").read_text())
    assert (export["family"], export["config"]["mlp"], export["config"]["norm"]) == ("swiglu-dit", "swiglu", "rms")


def test_the_stage_runs_in_vfm_curate_from_the_configs_stage_list(installed_plugins, tmp_path):
    from vfm_curator.synth import make_video

    make_video(tmp_path / "raw" / "a.mp4", [48, 30, 60])  # three shots
    config = tmp_path / "run.toml"
    config.write_text('stages = ["decode", "split", "keep-longest", "transcode", "embed", "caption", "filter", "write"]\n'
                      '[run]\nrunner = "serial"\n[options.keep-longest]\nkeep = 1\n')
    env = plugin_env([installed_plugins("vfm-plugin-example")])
    result = vfm("curate", str(tmp_path / "raw"), "-o", str(tmp_path / "out"), "--config", str(config), env=env)
    assert result.returncode == 0, result.stderr
    import pyarrow.parquet as pq

    clips = pq.read_table(tmp_path / "out" / "clips.parquet").to_pylist()
    assert [(c["start_frame"], c["end_frame"]) for c in clips] == [(78, 138)], "only the longest shot is kept"
    config.write_text(config.read_text().replace("keep = 1", "keep = 0"))
    result = vfm("curate", str(tmp_path / "raw"), "-o", str(tmp_path / "out0"), "--config", str(config),
                 env={**env, "COLUMNS": "200"})  # the stage's check_options, before any work: a bad --config
    assert result.returncode == 2 and "stage 'keep-longest': option keep = 0 is out of range" in result.stderr
