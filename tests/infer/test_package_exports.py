"""A library user's first lines: ``from vfm_infer import VideoPipeline, GenerationSpec, write_mp4``.
Every name in each library's ``__all__`` resolves, and importing the package stays cheap (no torch)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHECK = """
import importlib, sys
package = importlib.import_module(sys.argv[1])
assert "torch" not in sys.modules, sys.argv[1] + " imported torch at import time"
missing = [name for name in package.__all__ if getattr(package, name, None) is None]
assert not missing, missing
try:
    package.no_such_name
except AttributeError as exc:
    assert "no_such_name" in str(exc)
else:
    raise AssertionError("an unknown attribute must raise AttributeError")
"""


@pytest.mark.parametrize("package", ["vfm_models", "vfm_parallel", "vfm_infer"])
def test_every_exported_name_resolves_and_the_import_does_not_load_torch(package):
    result = subprocess.run([sys.executable, "-c", CHECK, package], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_vfm_infer_exports_the_pipeline_and_video_output_of_its_readme():
    import vfm_infer
    from vfm_infer.pipeline import GenerationSpec, VideoPipeline
    from vfm_infer.samplers.base import Sampler
    from vfm_infer.video.frames import to_uint8_frames
    from vfm_infer.video.mp4 import write_mp4

    assert (vfm_infer.VideoPipeline, vfm_infer.GenerationSpec, vfm_infer.Sampler, vfm_infer.write_mp4,
            vfm_infer.to_uint8_frames) == (VideoPipeline, GenerationSpec, Sampler, write_mp4, to_uint8_frames)


DISCOVERY = """
import importlib, pydoc, re, sys
package = importlib.import_module(sys.argv[1])
missing = sorted(set(package.__all__) - set(dir(package)))
assert not missing, f"dir({sys.argv[1]}) lacks {missing}"
text = pydoc.render_doc(package, renderer=pydoc.plaintext)
# an entry of help's CLASSES, FUNCTIONS or DATA section: "    class Name(", "    name(" or "    NAME = "
unlisted = [name for name in package.__all__ if not re.search(rf"^ +(class )?{name}\\b", text, re.M)]
assert not unlisted, f"help({sys.argv[1]}) does not show {unlisted}"
"""


@pytest.mark.parametrize("package", ["vfm_models", "vfm_parallel", "vfm_infer", "vfm_data", "vfm_curator"])
def test_dir_and_help_of_each_library_show_its_lazily_exported_names(package):
    """``help(vfm_parallel)`` listed only ``__getattr__``: the names resolved on first access were missing
    from ``dir()``, so help and tab completion did not show ``ParallelDims`` or ``parallelize``."""
    result = subprocess.run([sys.executable, "-c", DISCOVERY, package], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


def test_vfm_infer_gets_a_sampler_by_name_as_vfm_models_gets_a_formulation():
    import vfm_infer
    from vfm_infer.samplers.flow import FlowHeun
    from vfm_plugins import UnknownNameError

    assert vfm_infer.get_sampler("flow-heun") is FlowHeun
    with pytest.raises(UnknownNameError, match="flow-euler"):
        vfm_infer.get_sampler("flow-hune")
