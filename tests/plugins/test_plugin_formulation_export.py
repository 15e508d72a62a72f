"""A plugin formulation that subclasses a built-in with a narrower constructor trains into an export
that `vfm generate` rebuilds it from (the export recorded the parent's options, which its constructor
refuses: a traceback from `vfm generate` after the whole training run)."""

from __future__ import annotations

import json

from tests.conftest import plugin_env
from tests.plugins.conftest import vfm, write_plugin

UNIFORM_FLOW = """
    from vfm_models.formulations.rectified_flow import RectifiedFlow
    from vfm_models.plugins import hookimpl


    class UniformFlow(RectifiedFlow):
        # rectified flow trained on uniform path positions: the logit-normal options are fixed here
        def __init__(self, shift: float = 1.0) -> None:
            super().__init__(shift=shift, uniform_fraction=1.0)


    @hookimpl
    def vfm_models_register_formulations(register):
        register("uniform-flow", UniformFlow)
"""


def test_a_formulation_subclass_with_a_narrower_constructor_trains_into_an_export_vfm_generate_samples(tmp_path):
    root = write_plugin(tmp_path / "plugin", "vfm-author-flow", {"author_flow": UNIFORM_FLOW},
                        {"vfm_models": "author_flow"})
    config = tmp_path / "run.toml"
    config.write_text('[model]\nfamily = "dit"\npreset = "tiny"\nformulation = "uniform-flow"\ntokenizer = "pixel"\n'
                      'formulation_options = { shift = 2.0 }\n'
                      'options = { hidden = 32, depth = 2, num_heads = 2, patch = [1, 2, 2] }\n'
                      '[data]\nsource = "synthetic"\nlatent_shape = [3, 2, 8, 8]\nmicro_batch = 2\nnum_classes = 10\n'
                      f'[train]\nsteps = 1\nout_dir = "{tmp_path / "run"}"\n'
                      '[logging]\ntensorboard = false\nloss_curve = false\nprogress = false\n')
    env = plugin_env([root])
    result = vfm("train", str(config), env=env)
    assert result.returncode == 0, result.stderr
    export = json.loads((tmp_path / "run" / "export" / "config.json").read_text())
    assert (export["formulation"], export["formulation_options"]) == ("uniform-flow", {"shift": 2.0})
    result = vfm("generate", "--checkpoint", str(tmp_path / "run" / "export"), "--prompt", "3", "--steps", "2",
                 "-o", str(tmp_path / "videos"), env=env)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "videos" / "0000.mp4").stat().st_size > 0
