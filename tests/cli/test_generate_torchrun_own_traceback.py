"""`vfm generate` under torchrun: an error the ranks agree on is one line on every rank, and a rank whose own failure
under it is a bug or an I/O error (which one process shows with its traceback) prints that traceback first; bad
input stays one line. Two torchrun nodes (one rank each) give each rank its own arguments; a probe plants a bug
in one rank's export load."""

from __future__ import annotations

import pytest

from tests.cli.probed_torchrun import run_probed_torchrun
from tests.cli.test_generate import make_export
from tests.cli.two_nodes import assert_each_node_ends_with_one_error, run_two_nodes


@pytest.mark.slow
def test_a_bug_or_io_error_on_one_node_shows_that_nodes_traceback_beside_the_agreed_line(tmp_path):
    # node 1's --prompts reads with an I/O error (/proc/self/mem at offset 0: EIO), which one process shows
    # with its traceback; agreed between the ranks it was one line on each node, and node 1's log lost where
    export = make_export(tmp_path / "export")
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("1\n")
    ends = run_two_nodes(["generate", "--checkpoint", str(export), "--steps", "2", "-o", str(tmp_path / "out")],
                         (["--prompts", str(prompts)], ["--prompts", "/proc/self/mem"]), timeout=100)
    assert_each_node_ends_with_one_error(ends, "error: rank 1 (host ")
    (_, healthy), (_, failed) = ends
    assert "[Errno 5] Input/output error" in [line for line in failed.splitlines() if line.startswith("error:")][0]
    assert "OSError: [Errno 5] Input/output error" in failed and "in read_prompts_file" in failed, failed
    assert "OSError" not in healthy and "read_prompts_file" not in healthy, healthy  # its own part went well


@pytest.mark.slow
def test_a_refusal_on_one_node_stays_one_line_without_a_traceback(tmp_path):
    # a prompts file that is not UTF-8 on node 1 is bad input (a usage error in one process): no traceback there
    export = make_export(tmp_path / "export")
    prompts, latin = tmp_path / "prompts.txt", tmp_path / "latin.txt"
    prompts.write_text("1\n")
    latin.write_bytes(b"caf\xe9\n")
    ends = run_two_nodes(["generate", "--checkpoint", str(export), "--steps", "2", "-o", str(tmp_path / "out")],
                         (["--prompts", str(prompts)], ["--prompts", str(latin)]), timeout=100)
    assert_each_node_ends_with_one_error(ends, "error: rank 1 (host ")
    for _, output in ends:
        assert "BadParameter" not in output and "read_prompts_file" not in output, output


#: rank 1's export load fails with a bug of its own (a ZeroDivisionError), rank 0's loads
BROKEN_LOAD = """
import os

if os.environ.get("RANK") == "1":
    from vfm_infer.pipeline import VideoPipeline

    def from_export(cls, *args, **kwargs):
        raise ZeroDivisionError("planted in rank 1's export load")

    VideoPipeline.from_export = classmethod(from_export)
"""


@pytest.mark.slow
def test_a_bug_in_one_ranks_export_load_shows_its_traceback_beside_the_agreed_line(tmp_path):
    export = make_export(tmp_path / "export")
    notes = tmp_path / "notes"
    notes.mkdir()
    done = run_probed_torchrun(tmp_path, BROKEN_LOAD, notes, "generate", "--checkpoint", str(export), "--prompt", "1",
                               "--steps", "2", "-o", str(tmp_path / "out"))
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-4000:]
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: rank 1 (host ") and "planted" in errors[0], output[-4000:]
    assert "ZeroDivisionError: planted in rank 1's export load" in output, output[-4000:]
    assert output.count("ZeroDivisionError: planted") == 1, output[-4000:]  # rank 1's, not rank 0's too
