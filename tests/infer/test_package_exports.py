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
