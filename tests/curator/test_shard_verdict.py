"""When a sharding run counts as having given nothing (``ShardSummary.problem``: `vfm shard` exits 1
with it) and when most clips failed for one reason (``ShardSummary.warning``)."""

from __future__ import annotations

from vfm_curator.pipelines.sharding import ShardSummary

NO_CAPTION = {"count": 6, "reason": "no caption, and captions are required", "cause": "config"}


def test_an_output_with_no_sample_is_a_problem_naming_the_commonest_failure():
    s = ShardSummary(out="/s", clips=10, tried=10, failures=10,
                     failure_kinds={"no-caption": NO_CAPTION, "error": {"count": 4, "reason": "bad file", "cause": "input"}})
    assert s.problem() == "no sample written: 6 of 10 clips failed (no-caption): no caption, and captions are required"
    assert s.warning() is None  # the problem says it already


def test_a_run_that_wrote_none_of_the_clips_it_tried_is_a_problem_even_over_earlier_shards():
    s = ShardSummary(out="/s", clips=10, tried=3, written=0, samples=7, failures=3,
                     failure_kinds={"timeout": {"count": 3, "reason": "stage timed out", "cause": "machine"}})
    assert s.problem() == "none of the 3 clips tried was written: 3 of 10 clips failed (timeout): stage timed out"


def test_a_resumed_run_with_nothing_left_to_do_is_fine():
    assert ShardSummary(out="/s", clips=10, skipped=10, samples=10).problem() is None


def test_an_empty_clip_table_is_a_problem():
    assert ShardSummary(out="/s").problem() == "no sample written: the clip table lists no clips"


def test_most_clips_failing_for_one_reason_warns_and_half_does_not():
    s = ShardSummary(out="/s", clips=10, tried=10, written=4, samples=4, failures=6, failure_kinds={"no-caption": NO_CAPTION})
    assert s.problem() is None
    assert s.warning() == "6 of 10 clips failed (no-caption): no caption, and captions are required; see /s/failures.jsonl"
    half = ShardSummary(out="/s", clips=12, tried=12, written=6, samples=6, failures=6, failure_kinds={"no-caption": NO_CAPTION})
    assert half.warning() is None
