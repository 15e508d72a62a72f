"""Checkpoint verification where the nodes of a job each read their own copy (node-local scratch), in real
gloo processes, each "node" under its own host name (a UTS namespace, as tests/cli/two_nodes.py gives them)."""

from __future__ import annotations

import ctypes
import json
import shutil
import socket
from pathlib import Path

from torch import nn

from tests.cli.two_nodes import needs_host_names
from tests.gloo import spawn
from vfm_parallel import checkpoint as ckpt

CLONE_NEWUTS = 0x04000000
HOSTS = ("node-a", "node-a", "node-b", "node-b")


def _as_host(name: str) -> None:
    """This process under host name ``name``: a UTS namespace of its own, as unshare -u makes one."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUTS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUTS)")
    socket.sethostname(name)


def _verify(rank: int, world: int, folders: list[str], shared: bool, hosts: tuple[str, ...] = HOSTS) -> str | None:
    _as_host(hosts[rank])
    try:
        ckpt.verify_files(folders[rank], shared=shared)
    except ckpt.DamagedCheckpointError as exc:
        return str(exc)
    return None


def _checkpoint(tmp_path: Path) -> Path:
    return ckpt.save(tmp_path / "saved", 1, model=nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)), rank_state={"pos": 1})


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01  # inside the tensor data: the header still parses, one weight differs
    path.write_bytes(bytes(data))


def _copies(tmp_path: Path) -> tuple[Path, Path, str]:
    """node-a's and node-b's copies (the same path on each node, here two folders) and the tensor file."""
    saved = _checkpoint(tmp_path)
    names = sorted(json.loads((saved / "manifest.json").read_text())["files"])
    tensors = next(n for n in names if n.startswith("tensors/"))
    a, b = (Path(shutil.copytree(saved, tmp_path / node / saved.name)) for node in ("a", "b"))
    return a, b, tensors


@needs_host_names
def test_a_flipped_byte_in_one_nodes_copy_is_found_on_every_rank_naming_that_nodes_rank_and_host(tmp_path):
    a, b, tensors = _copies(tmp_path)
    names = sorted(json.loads((a / "manifest.json").read_text())["files"])
    # node-a holds the rank that hashed this file when the 4 ranks split the files between them (it hashed
    # node-a's copy, and nobody node-b's); node-b holds the other two ranks
    i = names.index(tensors)
    hosts = tuple("node-a" if r // 2 == i % 4 // 2 else "node-b" for r in range(4))
    folders = [str(a if host == "node-a" else b) for host in hosts]
    _flip(b / tensors)
    results = spawn(_verify, 4, folders, False, hosts, timeout=120)
    # node-b's two ranks split its copy: the file's index among the same-size files (all of them), mod 2
    finder = [r for r in range(4) if hosts[r] == "node-b"][i % 2]
    expected = f"checkpoint {b} on rank {finder} (host node-b) is damaged: {tensors} has sha256 "
    assert all(r is not None and r.startswith(expected) and "the manifest says" in r for r in results), results
    assert len(set(results)) == 1, results


@needs_host_names
def test_a_file_missing_from_one_nodes_copy_names_every_rank_of_that_node(tmp_path):
    a, b, tensors = _copies(tmp_path)
    (b / tensors).unlink()
    results = spawn(_verify, 4, [str(a), str(a), str(b), str(b)], False, timeout=120)
    assert results == [f"checkpoint {b} on ranks 2-3 (host node-b) is damaged: {tensors} is missing"] * 4


@needs_host_names
def test_one_shared_copy_is_hashed_once_per_node_unless_known_shared(tmp_path):
    # one folder every node reads (a shared filesystem): each node hashes all of it, so the damage is found
    # once on each node; shared=True (the run folder, probed shared) hashes each file once in the whole job
    saved = _checkpoint(tmp_path)
    names = sorted(json.loads((saved / "manifest.json").read_text())["files"])
    tensors = next(n for n in names if n.startswith("tensors/"))
    _flip(saved / tensors)
    per_node = spawn(_verify, 4, [str(saved)] * 4, False, timeout=120)
    i = names.index(tensors)
    assert per_node[0].startswith(f"checkpoint {saved} on ranks {i % 2} (host node-a), {2 + i % 2} (host node-b) is "
                                  f"damaged: {tensors} has sha256 "), per_node
    once = spawn(_verify, 4, [str(saved)] * 4, True, timeout=120)
    assert once[0].startswith(f"checkpoint {saved} on rank {i % 4} (host {HOSTS[i % 4]}) is damaged: {tensors} "), once
    assert len(set(per_node)) == 1 and len(set(once)) == 1


def test_ranks_of_one_host_reading_one_copy_say_nothing_of_ranks(tmp_path):
    # one copy: the error names the folder as before, no rank or host (there is nothing to locate)
    saved = _checkpoint(tmp_path)
    tensors = next((saved / "tensors").glob("*.safetensors"))
    _flip(tensors)
    results = spawn(_verify_here, 2, str(saved), timeout=120)
    assert all(r.startswith(f"checkpoint {saved} is damaged: tensors/{tensors.name} has sha256 ") for r in results), results


def _verify_here(rank: int, world: int, folder: str) -> str | None:
    try:
        ckpt.verify_files(folder)
    except ckpt.DamagedCheckpointError as exc:
        return str(exc)
    return None
