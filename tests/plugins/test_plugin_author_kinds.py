"""A plugin for every kind the example package does not cover (tests/plugin_packages/vfm-plugin-kinds,
installed with pip), written from docs/plugins.md and the hooks' docstrings, used through vfm's own
commands: curate with its decoder, shot detector, embedder, captioner and scorer; shard with its
tokenizer and text encoder; load with its blender; generate from an export of its formulation;
evaluate with its metric; parallelize with its strategy."""

from __future__ import annotations

import json

import pytest
import torch

from tests.conftest import plugin_env
from tests.plugins.conftest import vfm

PACKAGE = "vfm-plugin-kinds"


def test_curate_shard_and_load_with_the_plugins_curator_models_and_data_kinds(installed_plugins, with_plugins, tmp_path):
    from vfm_curator.synth import make_video

    env = plugin_env([installed_plugins(PACKAGE)])
    make_video(tmp_path / "raw" / "a.mp4", [48, 30, 60])
    config = tmp_path / "curate.toml"
    config.write_text(
        'stages = ["decode", "split", "transcode", "embed", "caption", "filter", "write"]\n'
        '[run]\nrunner = "serial"\n'
        '[options.decode]\ndecoder = "kinds-pyav"\n'
        '[options.split]\nmethod = "kinds-every"\ndetector_options = { frames = 40 }\n'
        '[options.embed]\nembedder = "kinds-mean"\n'
        '[options.caption]\ncaptioner = "kinds-count"\ncaptioner_options = { prefix = "seen" }\n'
        '[options.filter]\nscorers = [{ name = "kinds-constant", min = 0.1, options = { value = 0.25 } }]\n')
    result = vfm("curate", str(tmp_path / "raw"), "-o", str(tmp_path / "clips"), "--config", str(config), "--no-progress",
                 env=env)
    assert result.returncode == 0, result.stderr
    import pyarrow.parquet as pq

    clips = sorted(pq.read_table(tmp_path / "clips" / "clips.parquet").to_pylist(), key=lambda c: c["start_frame"])
    assert [(c["start_frame"], c["end_frame"]) for c in clips] == [(0, 40), (40, 80), (80, 120)]  # 120-138: < 1 s
    assert all(len(c["embedding"]) == 3 and c["caption"].startswith("seen: ") for c in clips)
    assert all(dict(c["caption_by"])["captioner"] == "kinds-count" for c in clips)
    assert all(dict(c["scores"])["kinds-constant"] == 0.25 for c in clips)
    summary = json.loads((tmp_path / "clips" / "summary.json").read_text())
    assert "kinds-pyav" in json.dumps(summary), "the plugin decoder decoded the video"

    result = vfm("shard", str(tmp_path / "clips"), "-o", str(tmp_path / "shards"), "--tokenizer", "kinds-pixel",
                 "--text-encoder", "kinds-hash", "--runner", "serial", "--resolution", "32x32", "--frames", "4",
                 "--no-progress", env=env)
    assert result.returncode == 0, result.stderr

    with_plugins(PACKAGE)
    from vfm_data.loader import make_loader
    from vfm_plugins import PluginOptionError

    loader = make_loader(tmp_path / "shards" / "blend.yaml", patch_size=2, batch_size=1, blender="kinds-one")
    batch = next(iter(loader))
    assert tuple(batch.latents.shape) == (1, 3, 4, 32, 32)
    assert batch.latents.abs().max() <= 0.5, "kinds-pixel's latents are the pixels (in [-1, 1]) halved"
    with pytest.raises(PluginOptionError) as error:
        make_loader(tmp_path / "shards" / "blend.yaml", patch_size=2, batch_size=1, blender="kinds-one",
                    blender_options={"indx": 1})
    assert str(error.value) == "blender 'kinds-one' (from vfm-plugin-kinds 0.2.0) has no option indx; accepted: index"


def test_an_export_of_a_plugin_formulation_is_sampled_by_the_samplers_of_its_name(installed_plugins, with_plugins, tmp_path):
    """The formulation is registered as kinds-flow, but its denoiser returns the velocity (its
    name is rectified-flow), so vfm generate picks flow-euler, and names the flow samplers when
    another one is asked for."""
    with_plugins(PACKAGE)
    import vfm_models
    from vfm_models.export import save_export

    torch.manual_seed(0)
    model = vfm_models.get_family("dit").create("tiny", hidden=32, depth=2, num_heads=2, in_channels=3, patch=(1, 2, 2))
    formulation = vfm_models.get_formulation("kinds-flow")()
    formulation.loss(model, torch.randn(2, 3, 2, 8, 8), {"y": torch.tensor([1, 2])}, torch.Generator().manual_seed(0)).backward()
    save_export(tmp_path / "export", model, {
        "family": "dit", "config": model.config, "formulation": "kinds-flow", "formulation_options": formulation.options(),
        "tokenizer": "kinds-pixel", "tokenizer_options": {"patch": 1}, "latent_shape": [3, 2, 8, 8]})
    env = plugin_env([installed_plugins(PACKAGE)])
    result = vfm("generate", "--checkpoint", str(tmp_path / "export"), "--prompt", "3", "--steps", "2", "-o",
                 str(tmp_path / "videos"), env=env)
    assert result.returncode == 0, result.stderr
    assert "sampler FlowEuler" in result.stdout and (tmp_path / "videos" / "0000.mp4").stat().st_size > 0
    result = vfm("generate", "--checkpoint", str(tmp_path / "export"), "--prompt", "3", "--sampler", "edm-heun",
                 "-o", str(tmp_path / "videos2"), env=env)
    assert result.returncode == 1
    assert result.stderr.strip() == ("error: sampler 'edm-heun' samples 'edm' but this model was trained with 'kinds-flow' "
                                     "(name = 'rectified-flow'); use one of: flow-euler, flow-heun")


def test_vfm_eval_runs_the_plugin_metric_with_its_options_and_names_an_unknown_one(installed_plugins, tmp_path):
    from vfm_curator.synth import make_video
    from vfm_infer.video.mp4 import read_mp4

    make_video(tmp_path / "videos" / "0000.mp4", [24])
    (tmp_path / "prompts.txt").write_text("a red circle moving right\n")
    env = plugin_env([installed_plugins(PACKAGE)])
    args = ("eval", str(tmp_path / "videos"), "--prompts", str(tmp_path / "prompts.txt"), "--metric", "kinds-level")
    result = vfm(*args, "--option", "kinds-level.scale=2", env=env)
    assert result.returncode == 0, result.stderr
    scores = json.loads((tmp_path / "videos" / "scores.json").read_text())["kinds-level"]
    mean = float(read_mp4(tmp_path / "videos" / "0000.mp4").mean())
    assert scores["summary"]["mean_level"] == pytest.approx(2 * mean, rel=1e-6)
    result = vfm(*args, "--option", "kinds-level.scal=2", env=env)
    assert result.returncode == 1
    assert result.stderr.strip() == ("error: metric 'kinds-level' (from vfm-plugin-kinds 0.2.0) has no option scal; "
                                     "accepted: scale")


def test_the_plugin_strategy_applies_with_its_options_and_the_rest_by_name(with_plugins):
    with_plugins(PACKAGE)
    import vfm_models
    from vfm_curator.embedders import get_embedder
    from vfm_parallel import ParallelDims, parallelize
    from vfm_plugins import PluginOptionError

    model = vfm_models.get_family("dit").create("tiny", hidden=32, depth=2, num_heads=2, in_channels=3, patch=(1, 2, 2))
    pm = parallelize(model, ParallelDims(), ["kinds-tag"], options={"kinds-tag": {"tag": "seen"}})
    assert pm.model.kinds_tag == ("seen", 2) and pm.strategies == ["kinds-tag"]
    adapter = vfm_models.get_adapter("kinds-dit")
    state = model.state_dict()
    assert adapter.from_external(adapter.to_external(state, {}), {}).keys() == state.keys()
    emb, mask = vfm_models.get_text_encoder("kinds-hash")(dim=8).encode(["one two three", "one"])
    assert emb[:, 0, -1].tolist() == [4.0, 2.0]  # three words and the end token, one word and the end token
    with pytest.raises(PluginOptionError, match=r"embedder 'kinds-mean' \(from vfm-plugin-kinds 0.2.0\) has no option "
                                                r"device; accepted: \(none\)"):
        get_embedder("kinds-mean", device="cpu")
