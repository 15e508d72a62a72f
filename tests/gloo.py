"""Run a function in N real gloo processes and collect what each rank returns (shared by every
multi-process test)."""

from __future__ import annotations

import io
import os
import socket
import traceback

import torch
import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, fn, args, queue):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))  # as torchrun sets them
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world)
        result = fn(rank, world, *args)
        # as bytes: a tensor put on the queue as-is lives in this process's shared memory, which is
        # gone once the process exits, before the test may have read it
        buffer = io.BytesIO()
        torch.save(result, buffer)
        queue.put((rank, "ok", buffer.getvalue()))
        # every rank done before any group is torn down: tearing down gloo while a peer still has
        # work in flight can abort the process at exit
        dist.barrier()
        dist.destroy_process_group()
    except BaseException:  # report the worker's traceback to the test
        queue.put((rank, "error", traceback.format_exc()))


def spawn(fn, world: int, *args, timeout: float = 300.0) -> list:
    """``fn(rank, world, *args)`` in ``world`` gloo processes; the per-rank results, rank order.

    The port is free when picked but may be taken before rank 0 listens on it (another test run on the
    machine): a group that failed to start on EADDRINUSE, before ``fn`` ran, is started again."""
    for attempt in range(3):
        try:
            return _spawn_once(fn, world, args, timeout)
        except RuntimeError as exc:
            if "EADDRINUSE" not in str(exc) or attempt == 2:
                raise
    raise AssertionError("unreachable")


def _spawn_once(fn, world: int, args: tuple, timeout: float) -> list:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_worker, args=(r, world, port, fn, args, queue)) for r in range(world)]
    for p in procs:
        p.start()
    results: dict[int, object] = {}
    errors = []
    try:
        for _ in range(world):
            rank, status, value = queue.get(timeout=timeout)
            if status == "error":
                errors.append(f"rank {rank}:\n{value}")
                break
            # written a moment ago by this test's own child process (plain pickling, as the queue does)
            results[rank] = torch.load(io.BytesIO(value), weights_only=False)
    finally:
        for p in procs:
            p.join(timeout=5 if errors else 30)
            if p.is_alive():
                p.kill()
    if errors:
        raise RuntimeError("\n".join(errors))
    return [results[r] for r in range(world)]
