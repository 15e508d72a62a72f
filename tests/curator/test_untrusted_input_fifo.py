"""An input that is a named pipe (named by a manifest from elsewhere, or on the command line) fails as
"not a file" and the run goes on: the fingerprint of the input, taken before any stage, opened it
and waited for a writer forever, so ``vfm curate`` hung before clipping anything. Real H264 input
(PyAV), a real FIFO, a real run."""

from __future__ import annotations

import json
import os

import pytest

import vfm_curator
from tests.curator.moved_folder import SERIAL
from vfm_curator.synth import make_video


@pytest.mark.timeout(120)
def test_a_named_pipe_input_fails_as_not_a_file_and_the_run_goes_on(tmp_path):
    (tmp_path / "in").mkdir()
    make_video(tmp_path / "in" / "ok.mp4", [24], seed=1)
    os.mkfifo(tmp_path / "in" / "pipe.mp4")
    manifest = tmp_path / "in" / "list.jsonl"
    manifest.write_text("\n".join(json.dumps({"path": name}) for name in ("ok.mp4", "pipe.mp4")))
    summary = vfm_curator.curate(str(manifest), tmp_path / "out", SERIAL)
    assert summary.processed == 2 and summary.failures == 1 and summary.clips >= 1
    failed = [json.loads(line) for line in (tmp_path / "out" / "failures.jsonl").read_text().splitlines()]
    assert [f["source"].rsplit("/", 1)[-1] for f in failed] == ["pipe.mp4"]
    assert "not a file" in failed[0]["reason"]
