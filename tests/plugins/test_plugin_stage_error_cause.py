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


BATCH_STAGE = """
    from vfm_curator.plugins import hookimpl
    from vfm_curator.stages.base import Resources, Stage


    class BatchRaises(Stage):
        name = "batch-raises"
        resources = Resources(cpus=0.25, memory_mb=128)
        batch_size = 2

        def process(self, tasks):  # real batching: no process_one to guard each task
            raise ValueError("too many values to unpack")  # the plugin's own bug


    @hookimpl
    def vfm_curator_register_stages(register):
        register("batch-raises", BatchRaises)
"""


def test_a_plugin_stages_raising_batch_process_is_the_plugins_bug_under_both_runners(tmp_path):
    """A batch ``process`` override that raises was ``input``/``error`` under Ray (the video blamed, the reason
    naming the fused group, not the plugin) and stopped the serial run with a traceback."""
    from tests.conftest import plugin_env
    from tests.plugins.conftest import vfm, write_plugin
    from vfm_curator.synth import make_video

    make_video(tmp_path / "raw" / "a.mp4", [30], seed=1)
    make_video(tmp_path / "raw" / "b.mp4", [30], seed=2)
    root = write_plugin(tmp_path / "plugin", "vfm-author-batch", {"author_batch": BATCH_STAGE},
                        {"vfm_curator": "author_batch"}, version="0.2.0")
    recorded = {}
    for runner in ("serial", "ray"):
        config = tmp_path / f"{runner}.toml"
        config.write_text('stages = ["decode", "split", "batch-raises", "transcode", "embed", "caption", "filter", '
                          f'"write"]\n[run]\nrunner = "{runner}"\n')
        out = tmp_path / f"out-{runner}"
        result = vfm("curate", str(tmp_path / "raw"), "-o", str(out), "--config", str(config),
                     env={**plugin_env([root]), "COLUMNS": "300"})
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-4000:]
        assert "no clip written: all 2 videos failed" in result.stderr, result.stderr[-4000:]
        recorded[runner] = sorted((record["source"].rsplit("/", 1)[-1], record["stage"], record["cause"],
                                   record["kind"], record["reason"])
                                  for record in map(json.loads, (out / "failures.jsonl").read_text().splitlines()))
    reason = ("ValueError: too many values to unpack (a bug of stage 'batch-raises' from vfm-author-batch 0.2.0, not "
              "of this video; once the plugin is mended, run again with --retry-failed plugin-error)")
    assert recorded["serial"] == [(name, "batch-raises", "config", "plugin-error", reason) for name in ("a.mp4", "b.mp4")]
    assert recorded["ray"] == recorded["serial"]
