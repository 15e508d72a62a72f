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
"""

from __future__ import annotations

import argparse
import gc
import time

import torch

from gpu_train import GRIDS, WAN_1_3B, peer_model, vfm_model

MODES = ("eager", "compile")


def vfm_sampler(model, grid, dims, steps, mode):
    """(denoiser, sampler) through vfm's pipeline with a pass-through tokenizer of the latent's shape."""
    from vfm_infer.guidance import classifier_free
    from vfm_infer.pipeline import VideoPipeline

    meta = {"family": "dit-cross", "formulation": "rectified-flow", "formulation_options": {}, "tokenizer": "pixel",
            "tokenizer_options": {"patch": 1, "channels": dims["in_channels"]},
            "latent_shape": [dims["in_channels"], *grid], "text_encoder": "hash",
            "text_encoder_options": {"dim": dims["text_dim"], "max_length": dims["text_len"]}}
    pipe = VideoPipeline(model, meta, device="cuda", dtype="bf16", compile=mode == "compile")
    sampler = pipe.make_sampler("flow-euler", steps, {})
    cond, uncond = text_conditions(dims)
    return pipe, classifier_free(pipe._net(), cond, uncond, 5.0), sampler


def text_conditions(dims):
    g = torch.Generator(device="cuda").manual_seed(0)
    L = dims["text_len"]
    text = torch.randn(1, L, dims["text_dim"], device="cuda", generator=g)
    return {"text": text}, {"text": torch.zeros_like(text)}  # no padding mask in either model


def peer_denoiser(model, dims, mode):
    model = model.to("cuda", torch.bfloat16).eval().requires_grad_(False)
    if mode == "compile":
        for block in model.blocks:
            block.compile()
    cond, uncond = text_conditions(dims)
    text = torch.cat([cond["text"], uncond["text"]]).to(torch.bfloat16)

    def guided(x, s):
        out = model(hidden_states=torch.cat([x, x]).to(torch.bfloat16), timestep=torch.cat([s, s]) * 1000,
                    encoder_hidden_states=text, return_dict=False)[0].float()
        c, u = out.chunk(2)
        return u + 5.0 * (c - u)

    return guided


def timed_video(sample, noise, repeats=2):
    sample(noise)  # warm-up (compilation, allocator)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        sample(noise)
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


def run(kind, mode, tokens_key, dims, steps):
    from vfm_infer.samplers.flow import FlowEuler

    torch.manual_seed(0)
    grid = GRIDS[tokens_key]
    noise = torch.randn(1, dims["in_channels"], *grid, generator=torch.Generator().manual_seed(0)).to("cuda")
    try:
        if kind == "vfm":
            pipe, denoiser, sampler = vfm_sampler(vfm_model(dims), grid, dims, steps, mode)

            def sample(n):
                with torch.inference_mode(), pipe._autocast():
                    return sampler.sample(denoiser, n)
        else:
            denoiser, sampler = peer_denoiser(peer_model(dims), dims, mode), FlowEuler(steps)

            def sample(n):
                with torch.inference_mode():
                    return sampler.sample(denoiser, n)
        seconds = timed_video(sample, noise)
        result = {"video": seconds, "step": seconds / steps, "mem": torch.cuda.max_memory_allocated() / 2**30}
    except torch.OutOfMemoryError:
        result = {"oom": True}
    gc.collect()
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
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("benchmarks/gpu_generate.py needs a CUDA GPU")
    dims = dict(WAN_1_3B, **({"depth": args.depth} if args.depth else {}))
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; bf16 weights, CFG batch of 2, "
          f"flow-euler {args.steps} steps; best of 2 videos after 1 warm-up", flush=True)
    print(f"{'tokens':>6} {'mode':>8} {'model':>5} {'s/step':>8} {'s/video':>8} {'GiB':>5} {'vfm speed / peer':>16}", flush=True)
    for tokens_key in args.tokens:
        for mode in args.modes:
            rows = {kind: run(kind, mode, tokens_key, dims, args.steps) for kind in ("peer", "vfm")}
            for kind, r in rows.items():
                if r.get("oom"):
                    print(f"{tokens_key:>6} {mode:>8} {kind:>5} {'OOM':>8}", flush=True)
                    continue
                ratio = f"{rows['peer']['step'] / r['step']:.2f}x" if kind == "vfm" and "step" in rows["peer"] else "-"
                print(f"{tokens_key:>6} {mode:>8} {kind:>5} {r['step']:>8.4f} {r['video']:>8.2f} {r['mem']:>5.1f} {ratio:>16}", flush=True)


if __name__ == "__main__":
    main()
