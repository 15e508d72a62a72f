"""A stage class that cannot run is refused when it is built, in the driver, before any video is read:
not one ``NotImplementedError`` per video from the workers and a run that writes nothing."""

from __future__ import annotations

import pytest

from vfm_curator.stages.base import Resources, Stage, StageDefinitionError
from vfm_plugins import PluginError


class DropShort(Stage):
    """The mistake: the work is in a method no runner calls."""

    name = "drop-short"
    resources = Resources(cpus=0.25, memory_mb=64)
    defaults = {"min_frames": 40}

    def process_clip(self, task):
        task.clips = [c for c in task.clips if c.end - c.start >= self.opt["min_frames"]]


def test_a_stage_defining_neither_process_one_nor_process_is_refused_when_built_naming_the_method_to_define():
    with pytest.raises(StageDefinitionError) as err:
        DropShort(min_frames=10)
    assert str(err.value) == (
        f"stage 'drop-short' (class {__name__}.DropShort) defines neither process_one nor process: define "
        "process_one(self, task) to work on one task in place, or process(self, tasks) returning the tasks for real "
        "batching (DropShort has process_clip: rename it?)")
    # the stage author's mistake, not the config's: vfm prints a PluginError as one line, and a
    # ValueError would be reported as a bad --config
    assert isinstance(err.value, PluginError) and not isinstance(err.value, ValueError)


def test_a_stage_refused_for_its_definition_is_refused_before_its_options_are_checked():
    """The class is the problem, whatever options it is given."""
    with pytest.raises(StageDefinitionError, match="defines neither process_one nor process"):
        DropShort(no_such_option=1)


def test_a_stage_with_process_one_or_process_defined_here_or_inherited_is_built():
    class One(Stage):
        name = "one"

        def process_one(self, task):
            task.append(self.name)

    class Batched(Stage):
        name = "batched"

        def process(self, tasks):
            return tasks

    class Inherits(One):
        name = "inherits"

    for cls in (One, Batched, Inherits):
        assert cls().opt == {}
    tasks = [[]]
    assert Inherits().process(tasks) == [["inherits"]]
