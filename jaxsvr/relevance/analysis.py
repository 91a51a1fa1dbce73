"""Analyses of relevance matrices from Wray et al. 2021 (for notebooks and reports).

- `relevant_counts`: the average number of captions per video with relevance >= T, for a
  range of thresholds T (the paper's Fig. 4, one curve per proxy); `plot_relevant_counts`
  draws those curves with matplotlib (an optional dependency: `pip install matplotlib`).
- `row_correlation` / `correlation_table`: Pearson correlation between two proxies per
  video (row), and the mean over videos for every pair of proxies (the paper's Fig. 8).

All functions take [videos, captions] matrices (e.g. from `proxies` or the relevance CLI)
and return NumPy arrays; nothing here reads files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from jaxsvr.errors import InputError


def relevant_counts(rel: np.ndarray, thresholds: Sequence[float] | np.ndarray) -> np.ndarray:
    """Mean over rows of the number of columns with rel >= T, for each threshold T.

    Args:
      rel: [videos, captions] relevance.
      thresholds: T values.

    Returns:
      float64 [len(thresholds)].
    """
    rel = np.asarray(rel)
    t = np.asarray(thresholds, np.float64).reshape(-1)
    # One sort per row, then each count is a search: O(n log n) instead of O(n |T|).
    ordered = np.sort(rel.astype(np.float64), axis=1)
    n = rel.shape[1]
    counts = [n - np.searchsorted(row, t, side="left") for row in ordered]
    return np.mean(counts, axis=0) if counts else np.zeros(t.size)


def row_correlation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation of row i of `a` with row i of `b`, for every row.

    Returns:
      float64 [rows]; NaN where either row is constant (no correlation defined).
    """
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        raise InputError(f"proxy matrices differ in shape: {a.shape} vs {b.shape}")
    varies = (np.ptp(a, axis=1) > 0) & (np.ptp(b, axis=1) > 0)
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    num = np.sum(a * b, axis=1)
    den = np.sqrt(np.sum(a * a, axis=1) * np.sum(b * b, axis=1))
    return np.where(varies, num / np.where(varies, den, 1.0), np.nan)


def correlation_table(matrices: Mapping[str, np.ndarray]) -> tuple[list[str], np.ndarray]:
    """Mean per-video Pearson correlation between every pair of proxies.

    Args:
      matrices: proxy name -> [videos, captions] relevance, all the same shape.

    Returns:
      (names, [P, P] float64) with 1 on the diagonal; means skip constant rows.
    """
    names = list(matrices)
    table = np.eye(len(names))
    for i, a in enumerate(names):
        for j in range(i + 1, len(names)):
            table[i, j] = table[j, i] = np.nanmean(row_correlation(matrices[a], matrices[names[j]]))
    return names, table


def plot_relevant_counts(
    curves: Mapping[str, np.ndarray],
    thresholds: Sequence[float] | np.ndarray,
    ax=None,
    log: bool = True,
):
    """Draws `relevant_counts` curves (name -> counts per threshold) on a matplotlib axis.

    Returns:
      The axis (a new figure's when `ax` is None).
    """
    if ax is None:
        _, ax = pyplot().subplots(figsize=(5, 3.5))
    for name, counts in curves.items():
        ax.plot(thresholds, counts, label=name)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("relevance threshold T")
    ax.set_ylabel("relevant captions per video")
    ax.legend()
    return ax


def pyplot():
    """matplotlib.pyplot (the caller's backend), or InputError saying how to install it."""
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError(
            "plotting needs matplotlib: pip install matplotlib (or the notebooks extra)"
        ) from None
    return plt
