"""Packing efficiency and loader throughput of vfm-data on a mixed image/video dataset.

Mixture: 30% images (256 tokens) and videos of 1k-8k tokens (4-32 latent frames of 16x16 patches),
max_seq_len 8192. Efficiency = non-pad tokens / capacity, beside the padding baseline (each sample
padded to max_seq_len on its own). Run: python benchmarks/data_packing.py
"""

from __future__ import annotations

import contextlib
import io
import random
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

from vfm_data import SampleMeta, ShardWriter, make_loader, prepare_dataset

MAX_SEQ_LEN, PATCH, SAMPLES, STEPS = 8192, 2, 400, 60


def write(folder: Path) -> None:
    rng = random.Random(0)
    with ShardWriter(folder, max_shard_bytes=8 << 20) as w:
        for i in range(SAMPLES):
            image = rng.random() < 0.3
            frames = 1 if image else rng.randint(4, 32)  # 256 tokens per frame: 1k-8k tokens
            latent = torch.randn(1, frames, 32, 32).half()
            meta = SampleMeta(source="bench", span=(0, 1), fps=24, size=(256, 256), caption="",
                              modality="image" if image else "video", tokenizer="t", text_encoder="e")
            w.write(f"s{i:05d}", latent, torch.randn(8, 16).half(), meta)
    with contextlib.redirect_stdout(io.StringIO()):
        prepare_dataset(folder)


def main() -> None:
    warnings.filterwarnings("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp))
        rows = []
        for workers in (0, 2):
            loader = make_loader(tmp, patch_size=PATCH, batch_size=4, max_seq_len=MAX_SEQ_LEN, packing_buffer=256,
                                 num_workers=workers)
            with contextlib.redirect_stderr(io.StringIO()):
                next(loader)  # start-up (and the first packing buffer) not timed
                t0, samples, tokens, capacity, seqlens = time.perf_counter(), 0, 0, 0, []
                for _ in range(STEPS):
                    b = next(loader)
                    samples += len(b.keys)
                    tokens += b.num_tokens
                    capacity += b.patches.shape[0] * b.patches.shape[1]
                    seqlens += [g[0] * g[1] * g[2] for g in b.grids]
                dt = time.perf_counter() - t0
            loader.close()
            baseline = sum(seqlens) / (len(seqlens) * MAX_SEQ_LEN)
            rows.append((workers, tokens / capacity, baseline, samples / dt, tokens / dt))
    print(f"{'workers':>7} | {'packing eff.':>12} | {'padding baseline':>16} | {'ratio':>6} | {'samples/s':>9} | {'tokens/s':>9}")
    for w, eff, base, sps, tps in rows:
        print(f"{w:>7} | {eff:>12.2%} | {base:>16.2%} | {eff / base:>5.2f}x | {sps:>9.1f} | {tps:>9.0f}")
    print(f"goal: packing efficiency >= 97% -> {'met' if min(r[1] for r in rows) >= 0.97 else 'NOT met'}", file=sys.stderr)


if __name__ == "__main__":
    main()
