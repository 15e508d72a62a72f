"""``vfm plan --measure K``: the truth the model is checked against. Run the top K layouts for a few
steps (the caller says how: the CLI launches ``vfm train`` under torchrun), rank them by measured
tokens/s and compare the two orders with Spearman's rank correlation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from vfm_parallel.planner.ranking import Prediction


@dataclass
class Measured:
    prediction: Prediction
    tokens_per_s_per_gpu: float  # measured; 0 when the run failed
    error: str = ""


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, highest value first, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: -values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation of two equally long sequences (Pearson on their ranks)."""
    if len(a) != len(b) or len(a) < 2:
        raise ValueError(f"spearman needs two sequences of the same length >= 2, got {len(a)} and {len(b)}")
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb) if va and vb else 0.0


def measure(predictions: Sequence[Prediction], run: Callable[[Prediction], float]) -> tuple[list[Measured], float | None]:
    """Run each prediction's layout with ``run`` (returns measured tokens/s/GPU, raises on failure);
    return them ranked by measurement and Spearman's rho between predicted and measured rates
    (over the layouts that ran; None when fewer than two did)."""
    results = []
    for p in predictions:
        try:
            results.append(Measured(p, float(run(p))))
        except Exception as exc:  # one broken layout must not hide the others' figures
            results.append(Measured(p, 0.0, str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__))
    ok = [m for m in results if not m.error]
    rho = spearman([m.prediction.tokens_per_s_per_gpu for m in ok], [m.tokens_per_s_per_gpu for m in ok]) if len(ok) >= 2 else None
    results.sort(key=lambda m: -m.tokens_per_s_per_gpu)
    return results, rho
