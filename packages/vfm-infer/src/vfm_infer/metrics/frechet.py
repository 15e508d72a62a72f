"""The Fréchet distance between two Gaussians fitted to feature sets (FID's and FVD's formula), in float64.

    d^2 = |mu1 - mu2|^2 + tr(S1) + tr(S2) - 2 tr((S1 S2)^(1/2))

``tr((S1 S2)^(1/2))`` is computed as ``tr((A S2 A)^(1/2))`` with ``A = S1^(1/2)``: S1 S2 is similar to
the symmetric positive semi-definite A S2 A (``A^-1 (A S2 A) A``), so both have the same eigenvalues, and
those of a symmetric matrix come from ``eigh``, which is stable even when S1 or S2 is singular (fewer
samples than dimensions), where a general ``sqrtm`` of S1 S2 returns complex parts and needs the usual
``offset * I`` patch. Tiny negative eigenvalues (round-off) are clipped to 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class GaussianStats:
    """Mean (D,) and covariance (D, D) of ``count`` feature vectors."""

    mu: np.ndarray
    sigma: np.ndarray
    count: int

    @classmethod
    def of(cls, features: np.ndarray) -> GaussianStats:
        """Stats of (N, D) features: the mean and the unbiased covariance (N - 1), as FID/FVD code uses."""
        x = np.asarray(features, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] < 2:
            raise ValueError(f"a covariance needs at least 2 feature vectors (N, D); got shape {x.shape}")
        return cls(x.mean(axis=0), np.cov(x, rowvar=False), x.shape[0])


def psd_sqrt(matrix: np.ndarray) -> np.ndarray:
    """The symmetric square root of a symmetric positive semi-definite matrix (eigenvalues below 0 from
    round-off count as 0)."""
    sym = (matrix + matrix.T) / 2
    values, vectors = np.linalg.eigh(sym)
    return (vectors * np.sqrt(np.clip(values, 0, None))) @ vectors.T


def trace_sqrt_product(sigma1: np.ndarray, sigma2: np.ndarray) -> float:
    """tr((sigma1 sigma2)^(1/2)) for symmetric PSD matrices."""
    root = psd_sqrt(sigma1)
    inner = root @ sigma2 @ root
    values = np.linalg.eigvalsh((inner + inner.T) / 2)
    return float(np.sqrt(np.clip(values, 0, None)).sum())


def frechet_distance(mu1: np.ndarray, sigma1: np.ndarray, mu2: np.ndarray, sigma2: np.ndarray) -> float:
    """d^2 between N(mu1, sigma1) and N(mu2, sigma2) (what FID and FVD report), in float64."""
    mu1, mu2 = np.asarray(mu1, np.float64), np.asarray(mu2, np.float64)
    sigma1, sigma2 = np.atleast_2d(np.asarray(sigma1, np.float64)), np.atleast_2d(np.asarray(sigma2, np.float64))
    if mu1.shape != mu2.shape or sigma1.shape != sigma2.shape or sigma1.shape != (mu1.shape[0],) * 2:
        raise ValueError(f"Fréchet distance of mismatched statistics: means {mu1.shape} and {mu2.shape}, "
                         f"covariances {sigma1.shape} and {sigma2.shape}")
    diff = mu1 - mu2
    distance = float(diff @ diff + np.trace(sigma1) + np.trace(sigma2) - 2 * trace_sqrt_product(sigma1, sigma2))
    return max(distance, 0.0)  # identical sets give -1e-12 from round-off


def frechet_between(a: GaussianStats, b: GaussianStats) -> float:
    return frechet_distance(a.mu, a.sigma, b.mu, b.sigma)
