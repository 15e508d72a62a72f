"""Semantic de-duplication: clips whose embeddings are near each other (cosine >= a threshold).

It scales past memory the way SemDeDup does: spherical k-means on a sample puts every embedding in
a bucket, then pairs are compared only inside a bucket, ``chunk`` rows against ``chunk`` columns at
a time (the embeddings may be a memory-mapped file: one bucket is read at a time). Within a bucket
clips are visited best first (the caller's ``rank``): a clip is removed when an earlier *kept* clip
is at least ``threshold`` similar, so every removed clip names a kept near-duplicate. Pairs that
k-means puts in different buckets are not compared: near-duplicates are so close that they almost
always share their nearest centroid (``buckets=1`` compares every pair).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Clips per bucket aimed at when the bucket count is chosen from the number of clips.
BUCKET_SIZE = 2048


@dataclass
class Duplicates:
    """``kept_by[i]``: the index of the kept clip that removes clip ``i`` (-1: ``i`` is kept);
    ``similarity[i]``: their cosine; ``bucket[i]``: clip ``i``'s k-means bucket."""

    kept_by: np.ndarray  # (N,) int64
    similarity: np.ndarray  # (N,) float32
    bucket: np.ndarray  # (N,) int64

    @property
    def removed(self) -> np.ndarray:
        return np.flatnonzero(self.kept_by >= 0)


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def kmeans(embeddings: np.ndarray, k: int, *, seed: int = 0, iters: int = 20, sample: int = 65536,
           chunk: int = 4096) -> np.ndarray:
    """``(k', D)`` unit centroids (k' <= k) of spherical k-means on at most ``sample`` rows chosen
    with ``seed``; deterministic for a given input and seed."""
    n = len(embeddings)
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(n, size=min(n, sample), replace=False))
    data = _unit(embeddings[rows])
    k = max(1, min(k, len(data)))
    centroids = data[np.sort(rng.choice(len(data), size=k, replace=False))]
    for _ in range(iters):
        labels = assign(data, centroids, chunk=chunk)
        sums = np.zeros_like(centroids)
        order = np.argsort(labels, kind="stable")
        present, starts = np.unique(labels[order], return_index=True)
        sums[present] = np.add.reduceat(data[order], starts, axis=0)  # per-bucket sums (np.add.at is far slower)
        empty = np.linalg.norm(sums, axis=1) == 0
        new = np.where(empty[:, None], centroids, _unit(sums))  # an empty bucket keeps its centroid
        if np.array_equal(new, centroids):
            break
        centroids = new
    return centroids


def assign(embeddings: np.ndarray, centroids: np.ndarray, *, chunk: int = 4096) -> np.ndarray:
    """Index of each row's most similar centroid (ties: the lowest index), ``chunk`` rows at a time."""
    out = np.empty(len(embeddings), dtype=np.int64)
    for s in range(0, len(embeddings), chunk):
        out[s:s + chunk] = np.argmax(_unit(embeddings[s:s + chunk]) @ centroids.T, axis=1)
    return out


def find_duplicates(embeddings: np.ndarray, rank: np.ndarray, *, threshold: float, buckets: int = 0,
                    chunk: int = 1024, seed: int = 0) -> Duplicates:
    """Near-duplicates among ``embeddings`` ``(N, D)`` (an array or a memory map; need not be unit
    length). ``rank`` ``(N,)``: the order in which clips are preferred (lower is kept first; equal
    ranks are broken by index). ``buckets``: k-means buckets (0: one per ~2048 clips). Memory beyond
    one bucket's rows is ``chunk`` x ``chunk`` similarities."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"dedup threshold {threshold!r}; accepted: a cosine similarity in (0, 1]")
    if chunk < 1:
        raise ValueError(f"dedup chunk {chunk!r}; accepted: an integer >= 1")
    n = len(embeddings)
    kept_by = np.full(n, -1, dtype=np.int64)
    similarity = np.zeros(n, dtype=np.float32)
    if n == 0:
        return Duplicates(kept_by, similarity, np.zeros(0, dtype=np.int64))
    k = buckets if buckets > 0 else math.ceil(n / BUCKET_SIZE)
    bucket = np.zeros(n, dtype=np.int64) if k == 1 else assign(embeddings, kmeans(embeddings, k, seed=seed), chunk=4096)
    order = np.lexsort((np.arange(n), np.asarray(rank)))  # best first; ties by index
    for b in np.unique(bucket):
        members = order[bucket[order] == b]  # this bucket, best first
        ascending = np.sort(members)  # a memory map reads rows in file order
        vecs = _unit(embeddings[ascending])[np.searchsorted(ascending, members)]
        _dedup_bucket(vecs, members, threshold, chunk, kept_by, similarity)
    return Duplicates(kept_by, similarity, bucket)


def _dedup_bucket(vecs: np.ndarray, members: np.ndarray, threshold: float, chunk: int, kept_by: np.ndarray,
                  similarity: np.ndarray) -> None:
    """Greedy in order: row i is removed by the most similar earlier kept row at >= threshold."""
    kept = np.zeros(len(members), dtype=bool)
    for s in range(0, len(members), chunk):
        e = min(s + chunk, len(members))
        rows = vecs[s:e]
        best = np.full(e - s, -np.inf, dtype=np.float32)
        arg = np.full(e - s, -1, dtype=np.int64)
        for c in range(0, s, chunk):  # earlier chunks: their kept rows are known
            sims = rows @ vecs[c:min(c + chunk, s)].T
            sims[:, ~kept[c:min(c + chunk, s)]] = -np.inf
            j = np.argmax(sims, axis=1)
            better = sims[np.arange(e - s), j] > best
            best[better], arg[better] = sims[np.arange(e - s), j][better], c + j[better]
        inner = rows @ rows.T  # this chunk: decided row by row, in order
        for i in range(e - s):
            earlier = np.flatnonzero(kept[s:s + i])
            if len(earlier):
                j = earlier[np.argmax(inner[i, earlier])]
                if inner[i, j] > best[i]:
                    best[i], arg[i] = inner[i, j], s + j
            if best[i] >= threshold:
                kept_by[members[s + i]] = members[arg[i]]
                similarity[members[s + i]] = best[i]
            else:
                kept[s + i] = True
