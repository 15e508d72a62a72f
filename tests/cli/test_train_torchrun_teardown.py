"""A 2-rank ``vfm train`` under torchrun ends without its ranks' interpreters tearing down while gloo
worker threads run. torch keeps the gloo groups, and their threads, alive past destroy_process_group;
a thread that frees a finished collective's tensor during the teardown takes the GIL, and CPython ends
it with pthread_exit, which aborts the rank: "terminate called without an active exception", exit 1
after the run had finished (about 1 in 4 runs on a loaded machine; vfm_parallel.process_group.leave_distributed).

The race itself depends on the scheduler; what makes it possible does not: a probe, loaded into every
process of the job through ``sitecustomize``, counts the gloo worker threads when its module is cleared
in the teardown, and notes that the atexit handlers ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.probed_torchrun import rank_notes, run_probed_torchrun

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "tiny.toml"
QUICK = ["data.micro_batch=4", "train.steps=3", "optim.warmup_steps=1", "checkpoint.interval=100000",
         "checkpoint.export=false", "logging.tensorboard=false", "logging.progress=false", "logging.loss_curve=false",
         "logging.peak_tflops=1.0", "logging.interval=1"]

PROBE = '''
import atexit, os

_OUT = os.environ["VFM_TEST_PROBE_DIR"]
_WHO = os.environ.get("RANK", "launcher") + "-" + str(os.getpid())


def _note(what, text, open=open, join=os.path.join):
    with open(join(_OUT, _WHO + "." + what), "w") as fh:
        fh.write(text)


def _gloo_threads(listdir=os.listdir, open=open):
    names = []
    for task in listdir("/proc/self/task"):
        with open("/proc/self/task/" + task + "/comm") as fh:
            names.append(fh.read().strip())
    return sum(name.startswith(("pt_gloo", "gloo_")) for name in names)


class _AtTeardown:
    def __del__(self, note=_note, count=_gloo_threads):  # runs when the teardown clears this module
        note("teardown", str(count()))


_probe = _AtTeardown()
atexit.register(lambda: _note("atexit", "ran"))
'''


@pytest.mark.slow
def test_no_rank_of_a_torchrun_run_tears_down_its_interpreter_with_gloo_threads_running(tmp_path):
    notes, out = tmp_path / "notes", tmp_path / "run"
    notes.mkdir()
    args = [a for item in [*QUICK, f"train.out_dir={out}"] for a in ("--set", item)]
    done = run_probed_torchrun(tmp_path, PROBE, notes, "train", str(TINY), *args)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows if "loss" in row] == [1, 2, 3]

    ranks_done = sorted(name.split("-")[0] for name in rank_notes(notes, "atexit"))
    assert ranks_done == ["0", "1"]  # the probe ran in both ranks, and so did their atexit handlers
    alive = {name: int(text) for name, text in rank_notes(notes, "teardown").items()}
    assert all(count == 0 for count in alive.values()), f"gloo threads running at a rank's teardown: {alive}"
