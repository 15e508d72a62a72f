"""Forward+backward throughput of a model family, plain batch vs packed (THD) batch, on this machine.

    python benchmarks/models_throughput.py                      # dit-cross S at 1k and 4k tokens
    python benchmarks/models_throughput.py --family moviegen --preset S --steps 3

Each row trains one step on the same number of latent tokens: "plain" is one sample of that size,
"packed" is an image and videos of different sizes concatenated with cu_seqlens. The ratio column is
packed over plain tokens/s, measured in the same process. FLOP/s use ``vfm_models.flops``.
"""

from __future__ import annotations

import argparse
import time

import torch

import vfm_models
from vfm_models.flops import flops_per_token

#: tokens -> (plain grid, packed grids) in latent (T, H, W) with patch (1, 2, 2).
LAYOUTS = {
    1024: ((4, 32, 32), [(1, 32, 32), (3, 32, 32)]),
    4096: ((16, 32, 32), [(1, 64, 64), (4, 32, 32), (8, 32, 32)]),
}


def _cond(model, n, text_len):
    cfg = model.config
    cond = {}
    if cfg.num_classes:
        cond["y"] = torch.zeros(n, dtype=torch.long)
    if cfg.text_dim:
        cond["text"] = torch.randn(n, text_len, cfg.text_dim)
        cond["text_mask"] = torch.ones(n, text_len, dtype=torch.bool)
    return cond


def _time(step, steps):
    step()  # warm-up
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) / steps


def measure(model, tokens, steps, text_len):
    C = model.config.in_channels
    plain_grid, packed_grids = LAYOUTS[tokens]
    x = torch.randn(1, C, *plain_grid)
    cond1 = _cond(model, 1, text_len)

    def plain():
        model.zero_grad(set_to_none=True)
        model(x, torch.rand(1), cond1).square().mean().backward()

    latents = [torch.randn(C, *g) for g in packed_grids]
    condn = _cond(model, len(latents), text_len)

    def packed():
        model.zero_grad(set_to_none=True)
        outs = model.forward_packed(latents, torch.rand(len(latents)), condn)
        sum(o.square().mean() for o in outs).backward()

    p = model.config.patch
    patch_grid = lambda g: (g[0] // p[0], g[1] // p[1], g[2] // p[2])  # noqa: E731
    tl = text_len if model.config.text_dim else 0
    rows = []
    for mode, step, grids in (("plain", plain, [plain_grid]), ("packed", packed, packed_grids)):
        seconds = _time(step, steps)
        flops = sum(flops_per_token(model, patch_grid(g), tl) * patch_grid(g)[0] * patch_grid(g)[1] * patch_grid(g)[2] for g in grids)
        rows.append((mode, len(grids), seconds, tokens / seconds, flops / seconds / 1e9))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", default="dit-cross")
    parser.add_argument("--preset", default="S")
    parser.add_argument("--tokens", type=int, nargs="+", default=[1024, 4096], choices=sorted(LAYOUTS))
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--text-len", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = vfm_models.get_family(args.family).create(args.preset)
    print(f"{args.family} {args.preset}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, "
          f"fp32, {torch.get_num_threads()} threads, {args.steps} timed steps after 1 warm-up")
    print(f"{'tokens':>7} {'mode':>7} {'samples':>7} {'s/step':>8} {'tokens/s':>9} {'GFLOP/s':>8} {'vs plain':>8}")
    for tokens in args.tokens:
        rows = measure(model, tokens, args.steps, args.text_len)
        base = rows[0][3]
        for mode, n, seconds, tps, gflops in rows:
            print(f"{tokens:>7} {mode:>7} {n:>7} {seconds:>8.2f} {tps:>9.0f} {gflops:>8.1f} {tps / base:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
