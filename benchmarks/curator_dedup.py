"""Semantic dedup: k-means buckets + chunked pairs against comparing every pair (buckets=1).

Synthetic clip embeddings: ``N`` clips around N/4 scene centres in D dimensions, a quarter of them
near copies (cosine about 0.99) of another clip. Prints, per N: seconds for all pairs and for
buckets, how many clips each removes, and the share of the all-pairs removals the buckets find.

    python benchmarks/curator_dedup.py [--sizes 4000 16000] [--dim 256]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from vfm_curator.dedup import find_duplicates


def embeddings(n: int, dim: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    originals = rng.normal(size=(n - n // 4, dim)).astype(np.float32)
    copies = originals[rng.integers(0, len(originals), n // 4)] + 0.08 * rng.normal(size=(n // 4, dim)).astype(np.float32)
    x = np.vstack([originals, copies])
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4000, 16000])
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--threshold", type=float, default=0.95)
    args = parser.parse_args()
    print(f"{'clips':>7} {'buckets':>7} {'all pairs s':>11} {'buckets s':>9} {'removed (all)':>13} {'removed (b)':>11} {'found':>6}")
    for n in args.sizes:
        emb = embeddings(n, args.dim)
        rank = np.zeros(n, dtype=np.int64)
        t0 = time.perf_counter()
        full = find_duplicates(emb, rank, threshold=args.threshold, buckets=1)
        t1 = time.perf_counter()
        buckets = max(2, n // 2048)
        fast = find_duplicates(emb, rank, threshold=args.threshold, buckets=buckets)
        t2 = time.perf_counter()
        a, b = set(full.removed.tolist()), set(fast.removed.tolist())
        print(f"{n:>7} {buckets:>7} {t1 - t0:>11.2f} {t2 - t1:>9.2f} {len(a):>13} {len(b):>11} {len(a & b) / max(1, len(a)):>6.1%}")


if __name__ == "__main__":
    main()
