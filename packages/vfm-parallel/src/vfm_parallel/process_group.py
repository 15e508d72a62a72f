"""Joining and leaving the torchrun process group, for every vfm entry point that runs distributed."""

from __future__ import annotations

import atexit
import os
import sys
import threading

import torch.distributed as dist


def env_world_size() -> int:
    """The world size torchrun announces (1 for a plain run); readable before any process group."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def env_several_nodes() -> bool:
    """Whether torchrun runs this job's ranks on more than one node (its world is more than this
    node's ranks); readable before any process group."""
    return env_world_size() > int(os.environ.get("LOCAL_WORLD_SIZE", "1"))


def init_distributed(device_type: str) -> tuple[int, int]:
    """(rank, world size); starts the process group (gloo on CPU, nccl on CUDA) under torchrun."""
    exit_with_launcher()
    world = env_world_size()
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def exit_with_launcher() -> None:
    """Under torchrun, end this rank soon after the launcher dies. torchrun starts each rank in a
    session of its own, so killing the launcher, or its process group, would leave the ranks
    training as orphans to the end; the launcher (torchrun's elastic agent) is the rank's parent."""
    if os.environ.get("TORCHELASTIC_RUN_ID") is not None:
        from vfm_plugins import exit_with_parent

        exit_with_parent(what=f"rank {os.environ.get('RANK', '?')}")


def ensure_process_group(device_type: str) -> None:
    """A process group for this process: the torchrun one, or (one plain process) a single-rank
    group over an in-memory store, so mesh-based strategies (FSDP, TP and the rest at size 1)
    run the same code on one device as on many."""
    if dist.is_initialized():
        return
    if env_world_size() > 1:
        init_distributed(device_type)
        return
    backend = "nccl" if device_type == "cuda" else "gloo"
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)


def shutdown_distributed() -> None:
    """Leave the process group in order: every rank reaches the barrier before any group is torn
    down (tearing down gloo while a peer still has work in flight can abort the process at exit,
    which torchrun would report as a failed job after the work was done)."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def leave_distributed(exit_code: int = 0) -> None:
    """:func:`shutdown_distributed`, then, in a rank torchrun started, the end of this process with
    ``exit_code`` (:func:`exit_before_teardown`); in any other process it returns.

    Why a rank does not return to Python's own exit: the gloo groups outlive destroy_process_group
    (torch keeps references to them, e.g. ``torch.distributed.nn.functional`` holds the default
    group in its argument defaults, DeviceMesh caches hold the mesh groups), and so do their worker
    threads. Such a thread may drop the last reference to a finished collective's tensors a moment
    after the barrier returned; a tensor that Python had released then takes the GIL to free its
    Python object, and once the interpreter is tearing down, CPython ends that thread with
    pthread_exit, whose unwinding through the C++ thread aborts the process ("terminate called
    without an active exception", SIGABRT: seen in about 1 of 4 2-rank runs on a loaded machine,
    the core's stack ProcessGroupGloo::runLoop > ~AsyncBarrierWork > ~AsyncAllreduceWork >
    TensorImpl::decref_pyobject > take_gil > PyThread_exit_thread). Without the teardown there is
    nothing for that thread to race."""
    shutdown_distributed()
    if os.environ.get("TORCHELASTIC_RUN_ID") is not None:  # a torchrun rank: this process is the run's alone
        exit_before_teardown(exit_code)


def exit_before_teardown(exit_code: int) -> None:
    """End the process as Python's exit does up to its interpreter teardown: wait for the threads
    that are not daemons, run the atexit handlers (a data loader's workers are closed there), flush
    stdout and stderr; then exit at once with ``exit_code``, without the teardown."""
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
            pass
    os._exit(exit_code)
