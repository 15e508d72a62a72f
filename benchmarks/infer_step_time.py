"""Seconds per denoising step on CPU for a tiny DiT: 1 process vs 2 processes (CP=2 ring or all-to-all, CFG-parallel).

    python benchmarks/infer_step_time.py [--steps 6] [--tokens-t 8]

Every configuration samples the same latent with edm-heun and guidance 4 (two branches per
evaluation); 2-process runs use real gloo process groups on this machine. Prints a table with the
ratio against the 1-process run and the largest difference of the result from it.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import time

import torch
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))


def build(frames: int):
    import vfm_models

    from vfm_infer.pipeline import VideoPipeline

    torch.manual_seed(0)
    model = vfm_models.get_family("dit").create(in_channels=12, patch=(1, 2, 2), hidden=128, depth=4, num_heads=4, num_classes=4)
    with torch.no_grad():  # adaLN-Zero starts with a zero output; give it weights, as after training
        for p in model.parameters():
            if p.abs().sum() == 0:
                p.normal_(0, 0.05)
    meta = {
        "family": "dit", "formulation": "edm", "formulation_options": {}, "tokenizer": "pixel",
        "tokenizer_options": {"patch": 2}, "latent_shape": [12, frames, 16, 16],
    }
    return VideoPipeline(model, meta)


def measure(pipe, steps: int):
    from vfm_infer.pipeline import GenerationSpec

    spec = GenerationSpec(sampler="edm-heun", steps=steps, guidance=4.0, seed=0)
    prepared = pipe.prepare(spec, ["1"])
    return prepared, spec


def run(pipe, prepared, steps):
    pipe.sample_latent(prepared, "1")  # warm-up (allocations, first collectives)
    start = time.perf_counter()
    latent = pipe.sample_latent(prepared, "1")
    return (time.perf_counter() - start) / steps, latent


def worker(rank, world, port, out, steps, frames, cfg_parallel, strategy):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    import torch.distributed as dist

    from vfm_infer.distributed import setup_inference

    dist.init_process_group("gloo", rank=rank, world_size=world)
    pipe = build(frames)
    prepared, _ = measure(pipe, steps)
    setup_inference(pipe, prepared, cfg_parallel=cfg_parallel, cp_strategy=strategy)
    seconds, latent = run(pipe, prepared, steps)
    if rank == 0:
        torch.save({"seconds": seconds, "latent": latent}, out)
    dist.barrier()  # every rank done before the groups are torn down (gloo can abort otherwise)
    dist.destroy_process_group()


def parallel(world, steps, frames, cfg_parallel, strategy="cp-ring"):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.pt")
        mp.spawn(worker, args=(world, port, out, steps, frames, cfg_parallel, strategy), nprocs=world, join=True)
        r = torch.load(out, weights_only=True)
    return r["seconds"], r["latent"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--frames", type=int, default=8, help="latent frames (tokens = frames * 8 * 8)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    pipe = build(args.frames)
    prepared, _ = measure(pipe, args.steps)
    base, ref = run(pipe, prepared, args.steps)
    rows = [("1 process", base, 0.0)]
    for label, cfg, strategy in (("2 processes, CP=2 (cp-ring)", False, "cp-ring"),
                                 ("2 processes, CP=2 (cp-ulysses)", False, "cp-ulysses"),
                                 ("2 processes, CFG-parallel", True, "cp-ring")):
        seconds, latent = parallel(2, args.steps, args.frames, cfg, strategy)
        rows.append((label, seconds, float((latent - ref).abs().max())))
    tokens = args.frames * 8 * 8
    print(f"tiny DiT (hidden 128, depth 4, 4 heads), {tokens} tokens, edm-heun {args.steps} steps, guidance 4, "
          f"1 intra-op thread per process, CPU ({os.cpu_count()} cores)")
    print(f"{'configuration':32s} {'s/step':>9s} {'vs 1 proc':>10s} {'max |diff|':>11s}")
    for label, seconds, diff in rows:
        print(f"{label:32s} {seconds:9.4f} {seconds / base:9.2f}x {diff:11.2e}")


if __name__ == "__main__":
    sys.exit(main())
