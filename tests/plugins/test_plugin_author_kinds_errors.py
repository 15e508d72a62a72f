"""A plugin author's mistakes in the kinds beyond families, samplers and stages (strategies,
decoders, shot detectors, scorers, metrics, embedders) are one line naming the name, its
distribution and what is accepted, not a traceback from inside vfm or a misleading "unknown name".
Each plugin is a real package (a module and a dist-info with entry points) loaded by the real hosts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import plugin_env
from tests.plugins.conftest import vfm, write_plugin
from vfm_plugins import PluginLoadError

STRATEGIES = """
    from vfm_parallel.plugins import hookimpl

    class NoApply:  # `aply`: a typo
        name = "oops-noapply"
        phase = "tp"
        mesh_dims = ("tp",)

        def aply(self, model, mesh, plan):
            return model

    def needs_a_gpu():
        raise RuntimeError("no CUDA device")

    @hookimpl
    def vfm_parallel_register_strategies(register):
        register("oops-noapply", NoApply)
        register("oops-factory", needs_a_gpu)
"""


def test_a_strategy_lacking_apply_or_whose_factory_raises_names_its_distribution(plugin):
    plugin("vfm-oops-strategies", {"oops_strategies": STRATEGIES}, {"vfm_parallel": "oops_strategies"})
    from vfm_parallel.strategy import get_strategy

    with pytest.raises(PluginLoadError, match=r"^strategy 'oops-noapply' \(from vfm-oops-strategies 0.0.1\) lacks apply; "
                                              r"a strategy has name, phase, mesh_dims and apply\(model, mesh, plan"):
        get_strategy("oops-noapply")
    with pytest.raises(PluginLoadError) as error:
        get_strategy("oops-factory")
    assert str(error.value) == ("strategy 'oops-factory' (from vfm-oops-strategies 0.0.1): its factory needs_a_gpu() "
                                "raised RuntimeError: no CUDA device")
    assert get_strategy("ddp").name == "ddp", "the built-ins keep working"


def test_vfm_train_refuses_a_strategy_lacking_apply_in_one_line(tmp_path):
    root = write_plugin(tmp_path / "strategies", "vfm-oops-strategies", {"oops_strategies": STRATEGIES},
                        {"vfm_parallel": "oops_strategies"})
    config = tmp_path / "run.toml"
    config.write_text('[model]\nfamily = "dit"\npreset = "tiny"\nformulation = "edm"\ntokenizer = "pixel"\n'
                      'options = { hidden = 32, depth = 2, num_heads = 2, patch = [1, 2, 2] }\n'
                      '[parallel]\nstrategies = ["oops-noapply"]\n'
                      '[data]\nsource = "synthetic"\nlatent_shape = [3, 2, 8, 8]\nmicro_batch = 2\n'
                      f'[train]\nsteps = 1\nout_dir = "{tmp_path / "run"}"\n')
    result = vfm("train", str(config), "--validate", env=plugin_env([root]))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(
        "error: strategy 'oops-noapply' (from vfm-oops-strategies 0.0.1) lacks apply;")


def test_an_instance_registered_in_place_of_a_class_is_named(plugin):
    plugin("vfm-oops-instance", {"oops_instance": """
        from vfm_infer.metrics.base import Metric, MetricResult
        from vfm_infer.plugins import hookimpl

        class Frames(Metric):
            name = "oops-frames"

            def evaluate(self, items):
                return MetricResult(summary={"videos": len(items)})

        @hookimpl
        def vfm_infer_register_metrics(register):
            register("oops-frames", Frames())  # the metric is built with the user's options: the class is wanted
    """}, {"vfm_infer": "oops_instance"})
    from vfm_infer.metrics.base import load_metric

    with pytest.raises(PluginLoadError) as error:
        load_metric("oops-frames")
    assert str(error.value) == ("metric 'oops-frames' (from vfm-oops-instance 0.0.1) is registered as an instance of "
                                "Frames, but a metric is built with the user's options: register its class (or a factory)")


def test_a_decoder_is_checked_for_what_its_kind_requires_and_must_be_a_class(plugin):
    plugin("vfm-oops-decoders", {"oops_decoders": """
        from vfm_curator.decoders.pyav import PyAVDecoder
        from vfm_curator.plugins import hookimpl

        class NoDecode:  # not a Decoder subclass, and without decode
            name = "oops-nodecode"
            uses_gpu = False

            @classmethod
            def available(cls):
                return True, ""

        class Named(PyAVDecoder):
            name = "oops-instance"

        @hookimpl
        def vfm_curator_register_decoders(register):
            register("oops-nodecode", NoDecode)
            register("oops-instance", Named())
    """}, {"vfm_curator": "oops_decoders"})
    from vfm_curator import decoders

    with pytest.raises(PluginLoadError, match=r"^decoder 'oops-nodecode' \(from vfm-oops-decoders 0.0.1, target "
                                              r"oops_decoders:NoDecode\) lacks decode; a decoder must have: name, "
                                              r"uses_gpu, available, decode"):
        decoders.decoder_class("oops-nodecode")
    with pytest.raises(PluginLoadError, match=r"^decoder 'oops-instance' \(from vfm-oops-decoders 0.0.1\) is registered "
                                              r"as an instance of Named; register the Decoder subclass itself"):
        decoders.decoder_class("oops-instance")


def test_a_broken_shot_detector_is_said_to_be_broken_not_unknown(plugin):
    plugin("vfm-oops-detector", {"oops_detector": """
        from vfm_curator.plugins import hookimpl

        def spans(scores, fps):  # a function: the kind wants a ShotDetector subclass
            return [(0, len(scores))]

        @hookimpl
        def vfm_curator_register_shot_detectors(register):
            register("oops-function", spans)
    """}, {"vfm_curator": "oops_detector"})
    from vfm_curator.stages.split import SplitStage

    with pytest.raises(ValueError) as error:
        SplitStage(method="oops-function")
    assert "unknown method" not in str(error.value)
    assert str(error.value).startswith("stage 'split': shot detector 'oops-function' (from vfm-oops-detector 0.0.1, "
                                       "target oops_detector:spans) lacks spans; a shot detector must have: spans")


def test_a_scorer_with_a_score_method_instead_of_call_is_named_before_any_clip(plugin):
    plugin("vfm-oops-scorer", {"oops_scorer": """
        from vfm_curator.plugins import hookimpl

        class Sharpness:
            def __init__(self, radius=1):
                self.radius = radius

            def score(self, clip, task):  # the filter calls scorer(clip, task)
                return 1.0

        @hookimpl
        def vfm_curator_register_scorers(register):
            register("oops-sharpness", Sharpness)
    """}, {"vfm_curator": "oops_scorer"})
    from vfm_curator.stages.base import StageSetupError
    from vfm_curator.stages.filter import FilterStage

    with pytest.raises(StageSetupError) as error:
        FilterStage(scorers=[{"name": "oops-sharpness", "options": {"radius": 2}}]).ensure_setup()
    assert str(error.value) == ("stage 'filter' could not be set up: TypeError: scorer 'oops-sharpness' (from "
                                "vfm-oops-scorer 0.0.1): its instances are not callable; a scorer's class defines "
                                "__call__(self, clip, task) -> float")
    with pytest.raises(StageSetupError, match=r"scorer 'oops-sharpness' \(from vfm-oops-scorer 0.0.1\) has no option "
                                              r"radious; accepted: radius"):
        FilterStage(scorers=[{"name": "oops-sharpness", "options": {"radious": 2}}]).ensure_setup()


def test_vfm_plugins_lists_the_other_hosts_when_one_has_a_clashing_name(tmp_path):
    clash = write_plugin(tmp_path / "clash", "vfm-oops-clash", {"oops_clash": """
        from vfm_infer.plugins import hookimpl as infer_hookimpl
        from vfm_parallel.plugins import hookimpl

        @hookimpl
        def vfm_parallel_register_strategies(register):
            register("ddp", "oops_clash:DDP")

        @infer_hookimpl
        def vfm_infer_register_metrics(register):
            register("oops-metric", "oops_clash:Metric")
    """}, {"vfm_parallel": "oops_clash", "vfm_infer": "oops_clash"})
    result = subprocess.run([sys.executable, "-m", "vfm_cli.main", "plugins", "--json"], capture_output=True, text=True,
                            env=plugin_env([clash]), timeout=120)
    assert result.returncode == 1
    rows = json.loads(result.stdout)
    assert {r["host"] for r in rows if r["status"] == "ok"} == {"vfm_models", "vfm_data", "vfm_curator", "vfm_infer"}
    assert ("vfm_infer", "metrics", "oops-metric", "vfm-oops-clash") in {(r["host"], r["kind"], r["name"], r["provider"])
                                                                         for r in rows}
    failed = [r for r in rows if r["status"] == "failed"]
    assert [(r["host"], r["name"]) for r in failed] == [("vfm_parallel", "vfm_parallel")]
    message = ("vfm_parallel: strategies name 'ddp' is registered twice: by vfm-parallel 0.1.0 and by vfm-oops-clash "
               "0.0.1 (plugin vfm-oops-clash:vfm-oops-clash)")
    assert failed[0]["description"].startswith(message)
    assert result.stderr.startswith(f"error: {message}") and len(result.stderr.splitlines()) == 1
    result = subprocess.run([sys.executable, "-m", "vfm_cli.main", "plugins", "--kind", "strategies"], capture_output=True,
                            text=True, env={**plugin_env([clash]), "COLUMNS": "300"}, timeout=120)
    assert result.returncode == 1 and "registered twice" in result.stdout, "the kind of the broken host is still accepted"


def test_a_raising_hook_drops_only_its_own_kind_and_says_so(plugin):
    plugin("vfm-oops-half", {"oops_half": """
        from vfm_models.plugins import hookimpl

        @hookimpl
        def vfm_models_register_tokenizers(register):
            register("oops-pixel", "vfm_models.tokenizers.pixel:PixelTokenizer")

        @hookimpl
        def vfm_models_register_text_encoders(register):
            raise RuntimeError("no weights folder")
    """}, {"vfm_models": "oops_half"})
    import vfm_models

    with pytest.warns(Warning) as caught:
        names = vfm_models.host.names("tokenizers")
    assert "oops-pixel" in names, "the hook that did not raise registered its names"
    assert [str(w.message) for w in caught] == [
        "vfm_models: plugin 'vfm-oops-half:vfm-oops-half' (vfm-oops-half 0.0.1) adds no text encoders (its other hooks' "
        "names are kept): raised in vfm_models_register_text_encoders: RuntimeError: no weights folder"]


def test_vfm_train_names_a_formulation_registered_as_an_instance(tmp_path):
    root = write_plugin(tmp_path / "formulation", "vfm-oops-formulation", {"oops_formulation": """
        from vfm_models.formulations import EDM
        from vfm_models.plugins import hookimpl

        @hookimpl
        def vfm_models_register_formulations(register):
            register("oops-edm", EDM())
    """}, {"vfm_models": "oops_formulation"})
    config = tmp_path / "run.toml"
    config.write_text('[model]\nfamily = "dit"\npreset = "tiny"\nformulation = "oops-edm"\ntokenizer = "pixel"\n'
                      '[data]\nsource = "synthetic"\nlatent_shape = [3, 2, 8, 8]\nmicro_batch = 2\n'
                      f'[train]\nsteps = 1\nout_dir = "{tmp_path / "run"}"\n')
    result = vfm("train", str(config), "--validate", env=plugin_env([root]))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "error: formulation 'oops-edm' (from vfm-oops-formulation 0.0.1) is registered as an instance of EDM, but a "
        "formulation is built with the user's options: register its class (or a factory)")


def test_a_strategy_whose_apply_returns_none_and_a_metric_returning_a_dict_are_named(plugin):
    plugin("vfm-oops-returns", {"oops_returns": """
        from vfm_infer.metrics.base import Metric
        from vfm_infer.plugins import hookimpl as infer_hookimpl
        from vfm_parallel.plugins import hookimpl

        class InPlace:
            name = "oops-inplace"
            phase = "compile"
            mesh_dims = ()

            def apply(self, model, mesh, plan):
                model.touched = True  # and no `return model`

        class Plain(Metric):
            name = "oops-plain"

            def evaluate(self, items):
                return {"videos": len(items)}

        @hookimpl
        def vfm_parallel_register_strategies(register):
            register("oops-inplace", InPlace)

        @infer_hookimpl
        def vfm_infer_register_metrics(register):
            register("oops-plain", Plain)
    """}, {"vfm_parallel": "oops_returns", "vfm_infer": "oops_returns"})
    import numpy as np

    import vfm_models
    from vfm_infer.metrics.base import EvalItem, evaluate
    from vfm_parallel import ParallelDims, parallelize

    model = vfm_models.get_family("dit").create("tiny", hidden=32, depth=2, num_heads=2, in_channels=3, patch=(1, 2, 2))
    from vfm_plugins import PluginResultError

    with pytest.raises(PluginResultError) as error:  # a PluginError: vfm's commands print it as one line
        parallelize(model, ParallelDims(), ["oops-inplace"])
    assert str(error.value) == ("strategy 'oops-inplace' (from vfm-oops-returns 0.0.1): apply returned None; it must "
                                "return the model (the one it was given, changed in place, or its wrapper)")
    with pytest.raises(PluginResultError) as error:
        evaluate([EvalItem("a red circle", np.zeros((2, 8, 8, 3), np.uint8))], {"oops-plain": {}})
    assert str(error.value) == ("metric 'oops-plain' (from vfm-oops-returns 0.0.1) returned a dict from evaluate; it must "
                                "return a vfm_infer.metrics.MetricResult(per_video, summary, notes)")


def test_a_strategy_whose_apply_returns_a_tuple_or_lacks_mesh_and_plan_is_named_not_a_traceback(plugin):
    # returned `(model, info)`: AttributeError 'tuple' object has no attribute 'parameters' deep in the
    # trainer; apply(self, model): "apply() takes 2 positional arguments but 4 were given" from parallelize
    plugin("vfm-oops-apply", {"oops_apply": """
        from vfm_parallel.plugins import hookimpl

        class Pair:
            name = "oops-pair"
            phase = "compile"
            mesh_dims = ()

            def apply(self, model, mesh, plan):
                return model, {"touched": True}

        class ModelOnly:
            name = "oops-model-only"
            phase = "compile"
            mesh_dims = ()

            def apply(self, model):
                return model

        @hookimpl
        def vfm_parallel_register_strategies(register):
            register("oops-pair", Pair)
            register("oops-model-only", ModelOnly)
    """}, {"vfm_parallel": "oops_apply"})
    import vfm_models
    from vfm_parallel import ParallelDims, parallelize
    from vfm_plugins import PluginResultError

    model = vfm_models.get_family("dit").create("tiny", hidden=32, depth=2, num_heads=2, in_channels=3, patch=(1, 2, 2))
    with pytest.raises(PluginResultError) as error:
        parallelize(model, ParallelDims(), ["oops-pair"])
    assert str(error.value) == ("strategy 'oops-pair' (from vfm-oops-apply 0.0.1): apply returned a tuple, not an "
                                "nn.Module; it must return the model (the one it was given, changed in place, or its wrapper)")
    with pytest.raises(PluginLoadError) as error:
        parallelize(model, ParallelDims(), ["oops-model-only"])
    assert str(error.value) == ("strategy 'oops-model-only' (from vfm-oops-apply 0.0.1): its apply(model) cannot take "
                                "(model, mesh, plan); a strategy's apply is apply(model, mesh, plan, **options), its "
                                "options keyword parameters")


def test_a_name_that_configs_and_options_cannot_write_is_refused_at_registration(plugin):
    plugin("vfm-oops-dotted", {"oops_dotted": """
        from vfm_infer.plugins import hookimpl

        @hookimpl
        def vfm_infer_register_metrics(register):
            register("clip.v2", "oops_dotted:Clip")  # --option clip.v2.model=... would name metric 'clip'
    """}, {"vfm_infer": "oops_dotted"})
    import vfm_infer

    with pytest.warns(Warning) as caught:
        assert "clip.v2" not in vfm_infer.host.names("metrics")
    assert [str(w.message) for w in caught] == [
        "vfm_infer: plugin 'vfm-oops-dotted:vfm-oops-dotted' (vfm-oops-dotted 0.0.1) adds no metrics (its other hooks' "
        "names are kept): raised in vfm_infer_register_metrics: PluginError: metric name 'clip.v2': a name is letters, "
        "digits, '-', '_' and '+' (not first), as configs and options write it ([options.NAME], --option NAME.KEY=VALUE)"]
