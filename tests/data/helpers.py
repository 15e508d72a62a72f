"""Tiny datasets written through vfm-data's own writer, for the data tests."""

from __future__ import annotations

import contextlib
import io
import os
import tarfile
from pathlib import Path

import torch

from vfm_data import SampleMeta, ShardWriter, prepare_dataset


def meta(modality: str = "video") -> SampleMeta:
    return SampleMeta(source="synthetic.mp4", span=(0.0, 1.0), fps=24.0, size=(32, 32), caption="a test clip",
                      modality=modality, tokenizer="test-tok", text_encoder="test-te")


def write_dataset(folder: Path, n: int, *, prefix: str = "k", seed: int = 0, channels: int = 4,
                  max_shard_bytes: int = 20_000, hw: int = 4) -> Path:
    """n samples: every third an image (T=1), others videos of 2-4 latent frames."""
    g = torch.Generator().manual_seed(seed)
    with ShardWriter(folder, max_shard_bytes=max_shard_bytes) as w:
        for i in range(n):
            image = i % 3 == 0
            t = 1 if image else 2 + i % 3
            w.write(f"{prefix}{i:05d}", torch.randn(channels, t, hw, hw, generator=g),
                    torch.randn(3 + i % 3, 8, generator=g), meta("image" if image else "video"))
    quiet(prepare_dataset, folder)
    return folder


def _forked(rank, world, port, fn, args, out, timeout):
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, **({"timeout": timeout} if timeout else {}))
    try:
        out[rank] = fn(rank, world, *args)
    finally:
        dist.destroy_process_group()


def in_forked_group(fn, world: int, *args, timeout=None) -> list:
    """``fn(rank, world, *args)`` in ``world`` forked processes of one gloo group (``timeout``: its
    collectives', a ``timedelta``); what each rank returned, in rank order. Fork: the loader's ranks
    need no fresh interpreter (spawning one costs seconds of imports, see ``tests.gloo.spawn``)."""
    import torch.multiprocessing as mp

    from tests.gloo import free_port

    out = mp.Manager().dict()
    mp.start_processes(_forked, args=(world, free_port(), fn, args, out, timeout), nprocs=world, join=True, start_method="fork")
    return [out[rank] for rank in range(world)]


def quiet(fn, *args, **kwargs):
    """Call ``fn`` with energon's progress printing silenced."""
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull), contextlib.redirect_stderr(io.StringIO()):
        return fn(*args, **kwargs)


def rewrite_shard(shard: Path, change) -> None:
    """Rewrite a shard's members in place through ``change(name, bytes) -> bytes | None`` (None drops
    the member): damaged data written the way a tar writer would, for the skip and error tests."""
    with tarfile.open(shard) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    with tarfile.open(shard, "w") as tar:
        for info, data in members:
            data = change(info.name, data)
            if data is not None:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
