"""Two torchrun "nodes" on this machine: two launchers, ``--nnodes 2 --nproc-per-node 1``, meeting in a c10d
rendezvous on 127.0.0.1 (as a multi-node job meets on its head node), each running ``vfm ARGS`` with its
own extra arguments (a node-local ``train.out_dir``, say). Given ``hostnames``, each node runs under its own
host name (a UTS namespace: ``unshare -u``, see :func:`can_rename_hosts`) and node i holds rank i (a static
rendezvous: c10d hands ranks out in the order the launchers join)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from tests.gloo import free_port


def can_rename_hosts() -> bool:
    """Whether this process may start children under another host name (root, or user namespaces)."""
    try:
        return subprocess.run(["unshare", "-u", "hostname", "probe"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


needs_host_names = pytest.mark.skipif(not can_rename_hosts(), reason="needs unshare -u (root or user namespaces) to "
                                                                     "give each node a host name")


def run_two_nodes(args: list[str], per_node: tuple[list[str], list[str]] = ([], []), timeout: float = 120,
                  hostnames: tuple[str, str] | None = None) -> list[tuple[int, str]]:
    """(exit status, output) of each node's launcher, once both have ended."""
    nodes = start_two_nodes(args, per_node, hostnames)
    try:
        outputs = [node.communicate(timeout=timeout)[0] for node in nodes]
        return [(node.returncode, output) for node, output in zip(nodes, outputs)]
    finally:
        for node in nodes:
            if node.poll() is None:
                node.kill()
                node.wait()


def start_two_nodes(args: list[str], per_node: tuple[list[str], list[str]] = ([], []),
                    hostnames: tuple[str, str] | None = None) -> list[subprocess.Popen]:
    """Each node's launcher, started (output piped, stderr into stdout); the caller ends them."""
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    launch = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1"]
    nodes = []
    for rank, extra in enumerate(per_node):
        if hostnames is None:
            meet = ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "two-nodes"]
        else:
            meet = ["--rdzv-backend", "static", "--master-addr", "127.0.0.1", "--master-port", str(port), "--node-rank", str(rank)]
        command = [*launch, *meet, "-m", "vfm_cli.main", *args, *extra]
        if hostnames is not None:
            command = ["unshare", "-u", "sh", "-c", f'hostname {hostnames[rank]} && exec "$@"', "sh", *command]
        nodes.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env))
    return nodes


@contextlib.contextmanager
def held_by_a_live_run(folder: Path) -> Iterator[int]:
    """``folder``'s lock held by a live process of this host (another run) for the block; its pid."""
    from tests.cli.test_run_folder_locks import HOLD

    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def assert_each_node_ends_with_one_error(ends: list[tuple[int, str]], start: str) -> None:
    """Both nodes ended with exit 1, each printing one ``error:`` line, which begins with ``start``."""
    outputs = "\n".join(o for _, o in ends)
    assert [code for code, _ in ends] == [1, 1], outputs
    for _, output in ends:
        errors = [line for line in output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, output
        assert errors[0].startswith(start), output
