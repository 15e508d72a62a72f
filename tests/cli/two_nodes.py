"""Two torchrun "nodes" on this machine: two launchers, ``--nnodes 2 --nproc-per-node 1``, meeting in a c10d
rendezvous on 127.0.0.1 (as a multi-node job meets on its head node), each running ``vfm ARGS`` with its
own extra arguments (a node-local ``train.out_dir``, say)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.gloo import free_port


def run_two_nodes(args: list[str], per_node: tuple[list[str], list[str]] = ([], []), timeout: float = 120) -> list[tuple[int, str]]:
    """(exit status, output) of each node's launcher, once both have ended."""
    endpoint = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    nodes = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
                               "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", "two-nodes",
                               "-m", "vfm_cli.main", *args, *extra],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
             for extra in per_node]
    try:
        outputs = [node.communicate(timeout=timeout)[0] for node in nodes]
        return [(node.returncode, output) for node, output in zip(nodes, outputs)]
    finally:
        for node in nodes:
            if node.poll() is None:
                node.kill()
                node.wait()
