"""A plugin stage that leaves ``task.clips`` as something other than a list (``filter(...)``, a generator) is
named with what ``task.clips`` must be; the next stage failed on it instead (``'filter' object is not
subscriptable`` in the serial runner, ``'int' object has no attribute 'staged'`` for a dict), naming neither the
plugin's stage nor the cause."""

from __future__ import annotations

from tests.conftest import plugin_env
from tests.plugins.conftest import vfm, write_plugin

STAGE = """
    from vfm_curator.plugins import hookimpl
    from vfm_curator.stages.base import Resources, Stage


    class FilterObject(Stage):
        name = "filter-object"
        resources = Resources(cpus=0.25, memory_mb=128)

        def process_one(self, task):
            task.clips = filter(lambda clip: clip.end - clip.start > 0, task.clips)  # not a list


    @hookimpl
    def vfm_curator_register_stages(register):
        register("filter-object", FilterObject)
"""


def test_a_stage_leaving_task_clips_as_a_filter_object_is_named_with_what_clips_must_be(tmp_path):
    from vfm_curator.synth import make_video

    make_video(tmp_path / "raw" / "a.mp4", [30, 30])
    root = write_plugin(tmp_path / "plugin", "vfm-author-clips", {"author_clips": STAGE}, {"vfm_curator": "author_clips"})
    config = tmp_path / "curate.toml"
    config.write_text('stages = ["decode", "split", "filter-object", "transcode", "embed", "caption", "filter", "write"]\n'
                      '[run]\nrunner = "serial"\n')
    result = vfm("curate", str(tmp_path / "raw"), "-o", str(tmp_path / "out"), "--config", str(config),
                 env={**plugin_env([root]), "COLUMNS": "300"})
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "error: stage 'filter-object' (class author_clips.FilterObject) left task.clips as a filter; it must stay a "
        "list of clips (`task.clips = [c for c in task.clips if ...]`)")
