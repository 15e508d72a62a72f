"""Training throughput on one GPU: vfm ``dit-cross`` beside the diffusers peer of the same shape.

    python benchmarks/gpu_train.py                         # 8k and 32k tokens, every mode, both models
    python benchmarks/gpu_train.py --tokens 8k --modes eager compile --profile

The model is ``dit-cross`` at Wan 2.1 1.3B dims (1536 wide, 30 blocks, 12 heads of 128, FFN 8960,
text width 4096, 512 text tokens), about 2.06B parameters; the peer is diffusers'
``WanTransformer3DModel`` at the same dims (diffusers is a benchmark-only dependency). Both train
the same way: fp32 master weights, bf16 autocast, fused AdamW, a rectified-flow MSE loss, batch 1.
Modes: ``eager``; ``compile`` (each block compiled alone, vfm's ``compile`` strategy; the peer's
blocks likewise); ``compile+ac`` (plus full activation checkpointing per block); ``packed`` (vfm
only, compiled: three videos of different sizes in one THD sequence with the same token total,
beside the plain compiled row). vfm gets a text padding mask, as its trainer feeds one (all
true here); the peer takes none. ``--no-text-mask`` drops vfm's too (both attend to all 512 text
tokens without a mask; ``benchmarks/gpu_attention.py`` prints what the mask costs per layer).

Printed per row: step time, tokens/s, the two MFU figures against the bf16 peak of the device
(``--peak-tflops``, default 989 for an H100 SXM):

- ``MFU 6N+12LhS``: the seeds' convention (every parameter charged to every token; comparable with
  NeMo's and the seeds' tables);
- ``MFU exec``: the matmul FLOPs the step really executes (``vfm_models.flops.flops_per_token``:
  adaLN and timestep linears once per sample, text keys/values once per text token);

and the ratio of vfm's tokens/s over the peer's in the same mode, measured in this process.
``--json FILE`` writes every row (rewritten after each, so a run stopped early keeps what it did).

``--smoke`` runs every mode and both models on the CPU at toy size (64 wide, 2 blocks, a few dozen
tokens, one timed step; ``compile`` with dynamo's ``eager`` backend, which traces the graphs but
needs no compiler): a check of this script's code paths before GPU time is spent, not a figure.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path

import torch

WAN_1_3B = dict(hidden=1536, depth=30, num_heads=12, ffn=8960, text_dim=4096, text_len=512, in_channels=16)
#: tokens -> latent grid (T', H', W') before the (1, 2, 2) patch: Wan's 240x416 and 480x832, 81 frames
GRIDS = {"8k": (21, 30, 52), "32k": (21, 60, 104)}
#: packed mode: three videos whose patch tokens add up to the plain grid's
PACKED = {"8k": [(5, 30, 52), (8, 30, 52), (8, 30, 52)], "32k": [(5, 60, 104), (8, 60, 104), (8, 60, 104)]}
MODES = ("eager", "compile", "compile+ac", "packed")
#: --smoke: the same code paths at toy size on the CPU (token totals as in the real grids: the
#: packed videos add up to the plain one)
SMOKE_DIMS = dict(hidden=64, depth=2, num_heads=2, ffn=128, text_dim=32, text_len=8, in_channels=4)
SMOKE_GRIDS = {"8k": (3, 4, 8), "32k": (3, 8, 8)}
SMOKE_PACKED = {"8k": [(1, 4, 8)] * 3, "32k": [(1, 8, 8)] * 3}


def smoke_sizes() -> None:
    """Swap the grids for toy ones (``--smoke``); every function reads the module-level tables."""
    GRIDS.update(SMOKE_GRIDS)
    PACKED.update(SMOKE_PACKED)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_memory_gib(device: torch.device) -> float:
    return torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else 0.0


def vfm_model(dims):
    import vfm_models

    return vfm_models.get_family("dit-cross").create(
        hidden=dims["hidden"], depth=dims["depth"], num_heads=dims["num_heads"], mlp_ratio=dims["ffn"] / dims["hidden"],
        text_dim=dims["text_dim"], in_channels=dims["in_channels"], patch=(1, 2, 2), qk_norm=True, pos_embed="rope")


def peer_model(dims):
    from diffusers import WanTransformer3DModel

    return WanTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=dims["num_heads"], attention_head_dim=dims["hidden"] // dims["num_heads"],
        in_channels=dims["in_channels"], out_channels=dims["in_channels"], text_dim=dims["text_dim"], freq_dim=256,
        ffn_dim=dims["ffn"], num_layers=dims["depth"], cross_attn_norm=True, qk_norm="rms_norm_across_heads",
        eps=1e-6, rope_max_seq_len=1024)


def prepare(model, kind: str, mode: str, device: torch.device, compile_options: dict | None = None):
    """Compile / checkpoint the blocks the way each code base offers it."""
    if mode == "eager":
        return model
    compile_options = compile_options or {}
    if kind == "vfm":
        from vfm_parallel import ParallelDims, parallelize

        strategies = ["ac", "compile"] if mode == "compile+ac" else ["compile"]  # packed: compiled too
        options = {"compile": compile_options} if compile_options else None
        return parallelize(model, ParallelDims(), strategies, device_type=device.type, options=options).model
    blocks = model.blocks
    if mode == "compile+ac":
        model.enable_gradient_checkpointing()
    for block in blocks:
        block.compile(**compile_options)
    return model


def flops_exec(model, grid, text_len) -> float:
    from vfm_models.flops import flops_per_token

    return flops_per_token(model, (grid[0], grid[1] // 2, grid[2] // 2), text_len)


def flops_convention(n_params, dims, tokens) -> float:
    from vfm_models.flops import model_flops_per_token

    return model_flops_per_token(n_params, dims["depth"], dims["hidden"], tokens)


def step_fn(model, kind, mode, tokens_key, dims, device, text_mask=True):
    """One optimizer step's closure on random data (rectified-flow loss, batch 1)."""
    C, L = dims["in_channels"], dims["text_len"]
    text = torch.randn(1, L, dims["text_dim"], device=device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)

    if kind == "vfm" and mode == "packed":
        grids = PACKED[tokens_key]
        x0s = [torch.randn(C, *g, device=device) for g in grids]
        cond = {"text": text.expand(len(grids), -1, -1).contiguous()}
        if text_mask:
            cond["text_mask"] = torch.ones(len(grids), L, dtype=torch.bool, device=device)

        def forward():
            s = torch.rand(len(grids), device=device)
            noise = [torch.randn_like(x) for x in x0s]
            xs = [(1 - si) * x + si * n for si, x, n in zip(s, x0s, noise)]
            outs = model.forward_packed(xs, s, cond)
            return sum(((o.float() - (n - x)) ** 2).mean() for o, n, x in zip(outs, noise, x0s)) / len(outs)
    else:
        x0 = torch.randn(1, C, *GRIDS[tokens_key], device=device)
        cond = {"text": text}
        if text_mask:
            cond["text_mask"] = torch.ones(1, L, dtype=torch.bool, device=device)

        def forward():
            s = torch.rand(1, device=device)
            noise = torch.randn_like(x0)
            x = (1 - s) * x0 + s * noise
            if kind == "vfm":
                out = model(x, s, cond)
            else:
                out = model(hidden_states=x, timestep=s * 1000, encoder_hidden_states=text, return_dict=False)[0]
            return ((out.float() - (noise - x0)) ** 2).mean()

    def step():
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = forward()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def timed(step, warmup: int, iters: int, device: torch.device) -> float:
    for _ in range(warmup):
        step()
    sync(device)
    start = time.perf_counter()
    for _ in range(iters):
        step()
    sync(device)
    return (time.perf_counter() - start) / iters


def profile(step, device: torch.device, rows: int = 25) -> None:
    from torch.profiler import ProfilerActivity, profile as torch_profile

    on_cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    with torch_profile(activities=activities) as prof:
        for _ in range(2):
            step()
        sync(device)
    sort = "cuda_time_total" if on_cuda else "cpu_time_total"
    print(prof.key_averages().table(sort_by=sort, row_limit=rows), flush=True)


def run(kind, mode, tokens_key, dims, args):
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = (vfm_model(dims) if kind == "vfm" else peer_model(dims)).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    grid = GRIDS[tokens_key]
    tokens = grid[0] * (grid[1] // 2) * (grid[2] // 2)
    exec_per_token = flops_exec(vfm_model_meta(dims), grid, dims["text_len"])
    model = prepare(model, kind, mode, device, args.compile_options)
    try:
        step = step_fn(model, kind, mode, tokens_key, dims, device, args.text_mask)
        seconds = timed(step, args.warmup, args.iters, device)
        if args.profile:
            print(f"--- profile: {kind} {mode} {tokens_key}", flush=True)
            profile(step, device)
        result = dict(seconds=seconds, tps=tokens / seconds, params=n_params, mem=peak_memory_gib(device),
                      mfu_conv=flops_convention(n_params, dims, tokens) * tokens / seconds / (args.peak_tflops * 1e12),
                      mfu_exec=exec_per_token * tokens / seconds / (args.peak_tflops * 1e12))
    except torch.OutOfMemoryError:
        result = dict(oom=True)
    del model
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    torch._dynamo.reset()
    return result


_META = {}


def vfm_model_meta(dims):
    """vfm's model on the meta device, for FLOP counts (the peer executes the same matmuls per
    video token; its modulation table is shared, so its executed FLOPs are, if anything, lower)."""
    key = tuple(sorted(dims.items()))
    if key not in _META:
        with torch.device("meta"):
            _META[key] = vfm_model(dims)
    return _META[key]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", nargs="+", default=list(GRIDS), choices=list(GRIDS))
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--models", nargs="+", default=["vfm", "peer"], choices=["vfm", "peer"])
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--peak-tflops", type=float, default=989.0)
    parser.add_argument("--depth", type=int, default=None, help="fewer blocks, for a quick check")
    parser.add_argument("--profile", action="store_true", help="print the top CUDA kernels of each run")
    parser.add_argument("--no-text-mask", dest="text_mask", action="store_false",
                        help="vfm without a text padding mask (the peer never has one)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here (after each row)")
    parser.add_argument("--smoke", action="store_true",
                        help="toy size on the CPU, one timed step, compile with dynamo's eager backend: checks the code paths")
    args = parser.parse_args()
    args.compile_options = {}
    if args.smoke:
        smoke_sizes()
        dims = dict(SMOKE_DIMS, **({"depth": args.depth} if args.depth else {}))
        args.device, args.warmup, args.iters, args.compile_options = "cpu", 1, 1, {"backend": "eager"}
        print("smoke: toy dims on the CPU, 1 warm-up + 1 timed step, compile with backend='eager'; "
              "the figures are no measurement", flush=True)
    elif not torch.cuda.is_available():
        raise SystemExit("benchmarks/gpu_train.py needs a CUDA GPU (or --smoke for a CPU check of the code paths)")
    else:
        dims = dict(WAN_1_3B, **({"depth": args.depth} if args.depth else {}))
        args.device = "cuda"
        torch.backends.cuda.matmul.allow_tf32 = True
    name = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    print(f"{name}, torch {torch.__version__}, peak {args.peak_tflops:g} TFLOP/s bf16; "
          f"{args.iters} timed steps after {args.warmup} warm-up", flush=True)
    results = {}
    header = f"{'tokens':>6} {'mode':>11} {'model':>5} {'params':>7} {'s/step':>7} {'tokens/s':>9} {'MFU 6N+12LhS':>12} {'MFU exec':>8} {'GiB':>5} {'vfm/peer':>8}"
    print(header, flush=True)
    for tokens_key in args.tokens:
        for mode in args.modes:
            for kind in args.models:
                if kind == "peer" and mode == "packed":
                    continue  # the peer has no packed (THD) path
                r = run(kind, mode, tokens_key, dims, args)
                results[(tokens_key, mode, kind)] = r
                if args.json:
                    write_json(args.json, name, dims, args, results)
                if r.get("oom"):
                    print(f"{tokens_key:>6} {mode:>11} {kind:>5} {'OOM':>7}", flush=True)
                    continue
                peer = results.get((tokens_key, "compile" if mode == "packed" else mode, "peer"), {})
                ratio = f"{r['tps'] / peer['tps']:.2f}x" if kind == "vfm" and peer.get("tps") else "-"
                print(f"{tokens_key:>6} {mode:>11} {kind:>5} {r['params'] / 1e9:>6.2f}B {r['seconds']:>7.3f} {r['tps']:>9.0f} "
                      f"{100 * r['mfu_conv']:>11.1f}% {100 * r['mfu_exec']:>7.1f}% {r['mem']:>5.1f} {ratio:>8}", flush=True)
    # vfm rows were printed before the peer of the same mode: the ratios, once more, at the end
    print("vfm tokens/s over the peer's (same tokens, same mode; packed vs the peer's compiled plain):")
    for (tokens_key, mode, kind), r in results.items():
        peer = results.get((tokens_key, "compile" if mode == "packed" else mode, "peer"), {})
        if kind == "vfm" and r.get("tps") and peer.get("tps"):
            print(f"  {tokens_key:>4} {mode:>11}: {r['tps'] / peer['tps']:.2f}x  (MFU exec {100 * r['mfu_exec']:.1f}%)")


def write_json(path: Path, device_name: str, dims: dict, args, results: dict) -> None:
    rows = [dict(tokens=t, mode=m, model=k, **r) for (t, m, k), r in results.items()]
    for row in rows:
        peer = results.get((row["tokens"], "compile" if row["mode"] == "packed" else row["mode"], "peer"), {})
        if row["model"] == "vfm" and row.get("tps") and peer.get("tps"):
            row["vfm_over_peer"] = row["tps"] / peer["tps"]
    meta = dict(device=device_name, torch=torch.__version__, dims=dims, peak_tflops=args.peak_tflops, warmup=args.warmup,
                iters=args.iters, text_mask=args.text_mask, smoke=args.smoke, time=time.strftime("%Y-%m-%d %H:%M:%S"))
    path.write_text(json.dumps(dict(meta, rows=rows), indent=1))


if __name__ == "__main__":
    main()
