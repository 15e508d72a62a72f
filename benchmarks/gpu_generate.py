"""Generation speed on one GPU: vfm's pipeline beside the diffusers peer of the same shape.

    python benchmarks/gpu_generate.py                      # 8k and 32k tokens, eager and compiled
    python benchmarks/gpu_generate.py --tokens 8k --steps 50 --modes compile

Both networks are the ones of ``benchmarks/gpu_train.py`` (vfm ``dit-cross`` and diffusers'
``WanTransformer3DModel`` at Wan 2.1 1.3B dims), random-initialised, weights in bf16. Both are
driven by the same sampler (vfm's ``flow-euler``) with classifier-free guidance at scale 5 (the
conditional and unconditional branch in one batch of two, 512 text tokens each), so the only
difference is the network and how vfm's pipeline runs it (``VideoPipeline``: bf16 weights under
autocast, float32 latents). Printed: seconds per denoising step (one guided evaluation) and per
video (``--steps`` steps), and vfm's speed over the peer's, measured in this process.
``--json FILE`` writes the rows (rewritten after each pair, so a run stopped early keeps them).

``--smoke`` runs every mode on the CPU at toy size (``gpu_train.py``'s toy dims, 2 steps; compile
with dynamo's ``eager`` backend): a check of the code paths before GPU time is spent, not a figure.
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path

import torch

from gpu_train import GRIDS, SMOKE_DIMS, WAN_1_3B, peak_memory_gib, peer_model, smoke_sizes, sync, vfm_model

MODES = ("eager", "compile")


def vfm_sampler(model, grid, dims, steps, mode, device):
    """(denoiser, sampler) through vfm's pipeline with a pass-through tokenizer of the latent's shape."""
    from vfm_infer.guidance import classifier_free
    from vfm_infer.pipeline import VideoPipeline

    meta = {"family": "dit-cross", "formulation": "rectified-flow", "formulation_options": {}, "tokenizer": "pixel",
            "tokenizer_options": {"patch": 1, "channels": dims["in_channels"]},
            "latent_shape": [dims["in_channels"], *grid], "text_encoder": "hash",
            "text_encoder_options": {"dim": dims["text_dim"], "max_length": dims["text_len"]}}
    pipe = VideoPipeline(model, meta, device=device.type, dtype="bf16", compile=mode == "compile")
    sampler = pipe.make_sampler("flow-euler", steps, {})
    cond, uncond = text_conditions(dims, device)
    return pipe, classifier_free(pipe._net(), cond, uncond, 5.0), sampler


def text_conditions(dims, device):
    g = torch.Generator(device=device).manual_seed(0)
    L = dims["text_len"]
    text = torch.randn(1, L, dims["text_dim"], device=device, generator=g)
    return {"text": text}, {"text": torch.zeros_like(text)}  # no padding mask in either model


def peer_denoiser(model, dims, mode, device):
    model = model.to(device, torch.bfloat16).eval().requires_grad_(False)
    if mode == "compile":
        for block in model.blocks:
            block.compile()
    cond, uncond = text_conditions(dims, device)
    text = torch.cat([cond["text"], uncond["text"]]).to(torch.bfloat16)

    def guided(x, s):
        out = model(hidden_states=torch.cat([x, x]).to(torch.bfloat16), timestep=torch.cat([s, s]) * 1000,
                    encoder_hidden_states=text, return_dict=False)[0].float()
        c, u = out.chunk(2)
        return u + 5.0 * (c - u)

    return guided


def timed_video(sample, noise, repeats=2):
    sample(noise)  # warm-up (compilation, allocator)
    sync(noise.device)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        sample(noise)
        sync(noise.device)
        best = min(best, time.perf_counter() - start)
    return best


def run(kind, mode, tokens_key, dims, steps, device):
    from vfm_infer.samplers.flow import FlowEuler

    torch.manual_seed(0)
    grid = GRIDS[tokens_key]
    noise = torch.randn(1, dims["in_channels"], *grid, generator=torch.Generator().manual_seed(0)).to(device)
    try:
        if kind == "vfm":
            pipe, denoiser, sampler = vfm_sampler(vfm_model(dims), grid, dims, steps, mode, device)

            def sample(n):
                with torch.inference_mode(), pipe._autocast():
                    return sampler.sample(denoiser, n)
        else:
            denoiser, sampler = peer_denoiser(peer_model(dims), dims, mode, device), FlowEuler(steps)

            def sample(n):
                with torch.inference_mode():
                    return sampler.sample(denoiser, n)
        seconds = timed_video(sample, noise)
        result = {"video": seconds, "step": seconds / steps, "mem": peak_memory_gib(device)}
    except torch.OutOfMemoryError:
        result = {"oom": True}
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    torch._dynamo.reset()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", nargs="+", default=list(GRIDS), choices=list(GRIDS))
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--steps", type=int, default=20, help="sampler steps per video")
    parser.add_argument("--depth", type=int, default=None, help="fewer blocks, for a quick check")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here (after each pair)")
    parser.add_argument("--smoke", action="store_true",
                        help="toy size on the CPU, 2 steps, compile with dynamo's eager backend: checks the code paths")
    args = parser.parse_args()
    if args.smoke:
        smoke_sizes()
        dims = dict(SMOKE_DIMS, **({"depth": args.depth} if args.depth else {}))
        device, args.steps = torch.device("cpu"), 2
        eager_backend_compile()
        print("smoke: toy dims on the CPU, 2 steps, compile with backend='eager'; the figures are no measurement", flush=True)
    elif not torch.cuda.is_available():
        raise SystemExit("benchmarks/gpu_generate.py needs a CUDA GPU (or --smoke for a CPU check of the code paths)")
    else:
        dims = dict(WAN_1_3B, **({"depth": args.depth} if args.depth else {}))
        device = torch.device("cuda")
    name = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    print(f"{name}, torch {torch.__version__}; bf16 weights, CFG batch of 2, "
          f"flow-euler {args.steps} steps; best of 2 videos after 1 warm-up", flush=True)
    print(f"{'tokens':>6} {'mode':>8} {'model':>5} {'s/step':>8} {'s/video':>8} {'GiB':>5} {'vfm speed / peer':>16}", flush=True)
    table = []
    for tokens_key in args.tokens:
        for mode in args.modes:
            rows = {kind: run(kind, mode, tokens_key, dims, args.steps, device) for kind in ("peer", "vfm")}
            for kind, r in rows.items():
                row = dict(tokens=tokens_key, mode=mode, model=kind, **r)
                if kind == "vfm" and "step" in r and "step" in rows["peer"]:
                    row["vfm_speed_over_peer"] = rows["peer"]["step"] / r["step"]
                table.append(row)
            if args.json:
                args.json.write_text(json.dumps(dict(device=name, torch=torch.__version__, dims=dims, steps=args.steps,
                                                     smoke=args.smoke, time=time.strftime("%Y-%m-%d %H:%M:%S"),
                                                     rows=table), indent=1))
            for kind, r in rows.items():
                if r.get("oom"):
                    print(f"{tokens_key:>6} {mode:>8} {kind:>5} {'OOM':>8}", flush=True)
                    continue
                ratio = f"{rows['peer']['step'] / r['step']:.2f}x" if kind == "vfm" and "step" in rows["peer"] else "-"
                print(f"{tokens_key:>6} {mode:>8} {kind:>5} {r['step']:>8.4f} {r['video']:>8.2f} {r['mem']:>5.1f} {ratio:>16}", flush=True)


def eager_backend_compile() -> None:
    """``--smoke``: every ``Module.compile`` (vfm's pipeline and the peer's blocks) traces with
    dynamo's ``eager`` backend, so the compiled path runs on a CPU without inductor's compile time."""
    compile_module = torch.nn.Module.compile

    def compile_eager(self, *args, **kwargs):
        kwargs.setdefault("backend", "eager")
        return compile_module(self, *args, **kwargs)

    torch.nn.Module.compile = compile_eager


if __name__ == "__main__":
    main()
