"""Plugin curation classes that break their contract (a stage, a shot detector, a decoder) are named. A plugin stage
whose process_one takes no task, or whose process returns no list, is named when
`vfm curate` runs it (the first failed every video as the video's fault, with Python's `takes 1 positional
argument but 2 were given`; the second stopped vfm curate with `object of type 'NoneType' has no len()`)."""

from __future__ import annotations

import pytest

from tests.conftest import plugin_env
from tests.plugins.conftest import vfm, write_plugin

STAGES = """
    from vfm_curator.plugins import hookimpl
    from vfm_curator.stages.base import Resources, Stage


    class NoTask(Stage):
        name = "no-task"
        resources = Resources(cpus=0.25, memory_mb=128)

        def process_one(self):
            pass


    class NoReturn(Stage):
        name = "no-return"
        resources = Resources(cpus=0.25, memory_mb=128)

        def process(self, tasks):
            for task in tasks:
                task.clips = task.clips[:1]  # and no `return tasks`


    @hookimpl
    def vfm_curator_register_stages(register):
        register("no-task", NoTask)
        register("no-return", NoReturn)
"""


def curate(tmp_path, stage: str, runner: str = "serial"):
    from vfm_curator.synth import make_video

    if not (tmp_path / "raw" / "a.mp4").exists():
        make_video(tmp_path / "raw" / "a.mp4", [30, 30])
    root = write_plugin(tmp_path / "plugin", "vfm-author-stages", {"author_stages": STAGES},
                        {"vfm_curator": "author_stages"}) if not (tmp_path / "plugin").exists() else tmp_path / "plugin"
    config = tmp_path / f"{stage}.toml"
    config.write_text(f'stages = ["decode", "split", "{stage}", "transcode", "embed", "caption", "filter", "write"]\n'
                      f'[run]\nrunner = "{runner}"\n')
    return vfm("curate", str(tmp_path / "raw"), "-o", str(tmp_path / f"out-{stage}-{runner}"), "--config", str(config),
               env={**plugin_env([root]), "COLUMNS": "300"})


def test_a_stage_whose_process_one_takes_no_task_is_named_before_any_video_is_read(tmp_path):
    result = curate(tmp_path, "no-task")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "error: stage 'no-task' (class author_stages.NoTask): its process_one(self) cannot take the task; "
        "define process_one(self, task)")
    assert not (tmp_path / "out-no-task-serial" / "failures.jsonl").exists(), "no video is blamed for it"


@pytest.mark.parametrize("runner", ["serial", "ray"])
def test_a_stage_whose_process_returns_none_is_named_not_a_traceback(tmp_path, runner):
    """Under Ray too (it failed every video there, cause input: the videos blamed and never redone)."""
    result = curate(tmp_path, "no-return", runner)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "error: stage 'no-return' (class author_stages.NoReturn): process returned None; it must return the list "
        "of tasks (those it was given, changed in place: `return tasks`)")
    assert not (tmp_path / f"out-no-return-{runner}" / "failures.jsonl").exists(), "no video is blamed for it"


DETECTOR = """
    from vfm_curator.plugins import hookimpl
    from vfm_curator.shot_detectors import ShotDetector


    class CountingCuts(ShotDetector):
        name = "counting-cuts"

        def spans(self, scores, *, fps):
            return len(scores)  # a count, where spans were meant


    @hookimpl
    def vfm_curator_register_shot_detectors(register):
        register("counting-cuts", CountingCuts)
"""


def _curate_one_video_with(tmp_path, dist: str, module: str, source: str, options_toml: str):
    """``vfm curate`` (serial runner) of one synthetic video, with the plugin ``dist`` (its ``module``
    holding ``source``) installed and ``options_toml`` in the run config."""
    from vfm_curator.synth import make_video

    make_video(tmp_path / "raw" / "a.mp4", [30, 30])
    root = write_plugin(tmp_path / "plugin", dist, {module: source}, {"vfm_curator": module})
    config = tmp_path / "run.toml"
    config.write_text('[run]\nrunner = "serial"\n' + options_toml)
    return vfm("curate", str(tmp_path / "raw"), "-o", str(tmp_path / "out"), "--config", str(config),
               env={**plugin_env([root]), "COLUMNS": "300"})


def test_a_shot_detector_whose_spans_returns_no_spans_is_named_in_the_videos_failure(tmp_path):
    result = _curate_one_video_with(tmp_path, "vfm-author-detector", "author_detector", DETECTOR,
                                    '[options.split]\nmethod = "counting-cuts"\n')
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert ("PluginResultError: shot detector 'counting-cuts' (class author_detector.CountingCuts): spans returned 60, "
            "of type int; it must return a list of (start, end) frame spans, e.g. shots_from_cuts(cuts, len(scores))"
            ) in result.stderr.strip().splitlines()[-1], result.stderr


DECODER = """
    from vfm_curator.decoders import Decoder
    from vfm_curator.plugins import hookimpl


    class OnePath(Decoder):
        name = "one-path"

        @classmethod
        def available(cls):
            return True, "always"

        def decode(self, path):  # the sizes argument left out
            yield 0.0, []


    @hookimpl
    def vfm_curator_register_decoders(register):
        register("one-path", OnePath)
"""


def test_a_decoder_whose_decode_takes_no_sizes_is_named_before_any_video_is_read(tmp_path):
    result = _curate_one_video_with(tmp_path, "vfm-author-decoder", "author_decoder", DECODER,
                                    '[options.decode]\ndecoder = "one-path"\n')
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "error: decoder 'one-path' (from vfm-author-decoder 0.0.1, class author_decoder.OnePath): its decode(self, path) "
        "cannot take (path, sizes); a decoder defines decode(self, path, sizes) yielding (time_s, [one frame per size])")
    assert not (tmp_path / "out" / "failures.jsonl").exists(), "no video is blamed for it"
