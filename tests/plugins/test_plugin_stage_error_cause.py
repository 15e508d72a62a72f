"""A plugin stage's own bug (a plain exception from its ``process_one``) is recorded in failures.jsonl as the
plugin's, naming its stage and distribution, with cause ``config`` and kind ``plugin-error`` (redone by
``--retry-failed plugin-error`` once the plugin is mended); it was cause ``input``, the video blamed and never
redone. An ``InputError`` the plugin raises on purpose keeps its own cause. Real H264 videos (PyAV), a real
plugin package loaded through its entry point, a real clipping run in process."""

from __future__ import annotations

import json

import pytest

STAGE = """
    from vfm_curator.errors import InputError
    from vfm_curator.plugins import hookimpl
    from vfm_curator.stages.base import Resources, Stage


    class Raises(Stage):
        name = "raises"
        resources = Resources(cpus=0.25, memory_mb=128)

        def process_one(self, task):
            if task.source.endswith("bad.mp4"):
                raise InputError("the plugin finds this video unusable")
            raise ValueError("too many values to unpack")  # the plugin's own bug


    @hookimpl
    def vfm_curator_register_stages(register):
        register("raises", Raises)
"""


def test_a_plugin_stages_plain_error_is_recorded_as_the_plugins_bug_not_the_videos(plugin, tmp_path):
    import vfm_curator
    from vfm_curator.errors import NothingWrittenError
    from vfm_curator.synth import make_video

    plugin("vfm-author-raises", {"author_raises": STAGE}, {"vfm_curator": "author_raises"}, version="0.3.1")
    make_video(tmp_path / "raw" / "good.mp4", [30], seed=1)
    make_video(tmp_path / "raw" / "bad.mp4", [30], seed=2)
    config = {"stages": ["decode", "split", "raises", "transcode", "embed", "caption", "filter", "write"],
              "run": {"runner": "serial"}}
    with pytest.raises(NothingWrittenError):
        vfm_curator.curate(tmp_path / "raw", tmp_path / "out", config)
    records = {json.loads(line)["source"].rsplit("/", 1)[-1]: json.loads(line)
               for line in (tmp_path / "out" / "failures.jsonl").read_text().splitlines()}
    good, bad = records["good.mp4"], records["bad.mp4"]
    assert (good["stage"], good["cause"], good["kind"]) == ("raises", "config", "plugin-error")
    assert good["reason"] == ("ValueError: too many values to unpack (a bug of stage 'raises' from vfm-author-raises "
                              "0.3.1, not of this video; once the plugin is mended, run again with --retry-failed "
                              "plugin-error)")
    assert (bad["cause"], bad["kind"], bad["reason"]) == ("input", "unusable-input", "the plugin finds this video unusable")
