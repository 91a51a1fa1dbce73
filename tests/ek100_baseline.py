"""Official-style EPIC-KITCHENS-100 multi-instance retrieval evaluation (nDCG and mAP) in NumPy.

This is a re-implementation *written from a description* of how the public EPIC-KITCHENS-100
multi-instance retrieval evaluation computes nDCG and mAP; no code was copied from it. It
processes whole matrices at once with full ``argsort`` / fancy indexing, exactly like the public
code, and is deliberately left unoptimised: it serves as the speed / memory baseline for the
benchmarks and as the "official" value on inputs without ties in the similarity scores.

Like the public code it has no special handling of queries without relevant items (they make the
result NaN), it breaks ties in the similarity scores however ``np.argsort`` happens to order them,
and it keeps NumPy's default dtypes (float64 for everything derived from ``arange`` / ``log2``).

Shapes: ``S`` (similarity) and ``R`` (relevance) are ``[n_videos, n_texts]``; video-to-text uses
the rows as queries, text-to-video uses ``S.T`` / ``R.T``.

``tie_free_similarity`` makes the inputs on which this baseline is well defined (no ties);
the speed benchmark and the tests that compare jaxsvr with this baseline both use it.
"""

from __future__ import annotations

import numpy as np


def _dcg(S: np.ndarray, R: np.ndarray, k_counts: np.ndarray) -> np.ndarray:
    """Per-row DCG of the ranking given by ``S``, cut off by the mask ``k_counts``."""
    n_rows, n_cols = S.shape
    ranks = np.argsort(S, axis=1)[:, ::-1]
    rows = np.repeat(np.arange(n_rows), n_cols).reshape(n_rows, n_cols)
    ranked_r = R[rows, ranks]
    discount = np.log2(np.arange(n_cols) + 2)
    return np.sum(ranked_r * k_counts / discount, axis=1)


def ndcg(S: np.ndarray, R: np.ndarray) -> float:
    """Mean nDCG over the rows of ``S`` (EPIC-KITCHENS-100 semantics, cut-off at K).

    Args:
        S: Similarity matrix ``[n_queries, n_items]``.
        R: Relevance matrix ``[n_queries, n_items]`` with values in ``[0, 1]``.

    Returns:
        Mean over queries of DCG / IDCG, where both sums stop after the K_i positions of the
        query's items with positive relevance.
    """
    S = np.asarray(S)
    R = np.asarray(R)
    k_counts = (np.sort(R, axis=1)[:, ::-1] > 0).astype(int)
    dcg = _dcg(S, R, k_counts)
    idcg = _dcg(R, R, k_counts)
    return float(np.mean(dcg / idcg))


def mean_ap(S: np.ndarray, R: np.ndarray) -> float:
    """Mean average precision over the rows of ``S`` (EPIC-KITCHENS-100 semantics).

    An item is relevant iff its relevance is exactly 1; the precision numerator adds up the
    graded relevance of all items ranked so far.

    Args:
        S: Similarity matrix ``[n_queries, n_items]``.
        R: Relevance matrix ``[n_queries, n_items]`` with values in ``[0, 1]``.

    Returns:
        Mean over queries of the average precision.
    """
    S = np.asarray(S)
    R = np.asarray(R)
    n_rows, n_cols = S.shape
    order = np.argsort(-S, axis=1)
    rows = np.arange(n_rows)[:, None]
    ranked_r = R[rows, order]
    relevant = ranked_r == 1
    cumulative = np.cumsum(ranked_r, axis=1)
    precision = cumulative / (np.arange(n_cols) + 1)
    ap = np.sum(precision * relevant, axis=1) / np.sum(relevant, axis=1)
    return float(np.mean(ap))


def tie_free_similarity(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Random float32 scores with no two equal values anywhere (so no ties to break).

    Args:
        shape: Shape of the result, e.g. ``[n_videos, n_texts]``.
        seed: Seed of the NumPy generator; equal seeds give equal arrays.

    Returns:
        float32 array of ``shape``: distinct positive values (1.0 .. 1e38) in random order.
    """
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    # Distinct bit patterns of positive floats are distinct values. Sort and drop repeats
    # rather than np.unique, which takes about a minute on 42 M values under NumPy 2.4
    # (its hash-based path) against 0.4 s for the sort; the result is the same.
    bits = np.sort(rng.integers(0x3F800000, 0x7F000000, n + n // 8 + 16, dtype=np.uint32))
    bits = bits[np.concatenate([[True], bits[1:] != bits[:-1]])]
    if bits.size < n:
        raise ValueError(f"drew {bits.size} distinct values for {n} scores; use another seed")
    return rng.permutation(bits)[:n].view(np.float32).reshape(shape)


def evaluate(S: np.ndarray, R: np.ndarray) -> dict[str, float]:
    """nDCG and mAP in both retrieval directions.

    Args:
        S: Similarity matrix ``[n_videos, n_texts]``.
        R: Relevance matrix ``[n_videos, n_texts]`` with values in ``[0, 1]``.

    Returns:
        Dict with ``ndcg_v2t``, ``ndcg_t2v``, ``ndcg_avg``, ``map_v2t``, ``map_t2v``,
        ``map_avg``; ``t2v`` is computed on ``S.T`` / ``R.T`` and ``_avg`` is the mean of the
        two directions.
    """
    S = np.asarray(S)
    R = np.asarray(R)
    ndcg_v2t = ndcg(S, R)
    ndcg_t2v = ndcg(S.T, R.T)
    map_v2t = mean_ap(S, R)
    map_t2v = mean_ap(S.T, R.T)
    return {
        "ndcg_v2t": ndcg_v2t,
        "ndcg_t2v": ndcg_t2v,
        "ndcg_avg": (ndcg_v2t + ndcg_t2v) / 2,
        "map_v2t": map_v2t,
        "map_t2v": map_t2v,
        "map_avg": (map_v2t + map_t2v) / 2,
    }
