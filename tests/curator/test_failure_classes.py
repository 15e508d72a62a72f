"""What a failure is classified as decides whether a later run does the video again."""

from __future__ import annotations

import pytest
import torch

from vfm_curator.failures import classify, should_retry


def _redone_next_run(exc: BaseException, *, by_plugin: bool = False) -> bool:
    cause, kind = classify(exc, by_plugin=by_plugin)
    record = {"cause": cause, "kind": kind, "attempts": 1}
    return should_retry(record, retry=None, max_attempts=3, options_digest=None, stamp=None)


@pytest.mark.parametrize("by_plugin", [False, True])
def test_a_gpu_out_of_memory_error_is_the_machines_and_is_redone_by_the_next_run(by_plugin):
    exc = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    assert classify(exc, by_plugin=by_plugin) == ("machine", "out-of-memory")
    assert _redone_next_run(exc, by_plugin=by_plugin)


def test_a_runtime_error_saying_out_of_memory_is_the_machines():
    exc = RuntimeError("CUDA error: out of memory")  # what cuda runtime calls outside torch's allocator raise
    assert classify(exc) == ("machine", "out-of-memory")


def test_another_unexpected_error_stays_the_videos_and_is_not_redone():
    exc = RuntimeError("shape mismatch")
    assert classify(exc) == ("input", "error")
    assert not _redone_next_run(exc)
