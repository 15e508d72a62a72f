"""A process whose loader forked its workers under the trainer's stop handler exits when it ends: that
handler takes a first SIGTERM as "finish the step", and multiprocessing's exit hook sends one
SIGTERM then waits without a timeout, so `vfm train` with data.workers > 0 hung after its last step."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.data.helpers import write_dataset

SCRIPT = textwrap.dedent("""
    import sys
    from vfm_data import make_loader
    from vfm_parallel.trainer.stopping import StopRequests

    with StopRequests(announce=False):  # as the trainer runs: the workers fork with its handler
        loader = make_loader(sys.argv[1], patch_size=2, batch_size=1, num_workers=2)
        for _ in range(3):
            next(loader)
    print("done", flush=True)
""")


def test_a_process_with_loader_workers_forked_under_the_stop_handler_exits_when_it_ends(tmp_path: Path):
    folder = write_dataset(tmp_path / "ds", 12)
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(folder)], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0 and "done" in done.stdout, done.stderr[-3000:]
