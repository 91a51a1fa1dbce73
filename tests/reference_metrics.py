"""Independent, deliberately straightforward reference implementation of the retrieval metrics.

This module exists only so the fast evaluation engine in ``jaxsvr.evaluation`` can be tested
against something obviously correct. It shares no code with that engine (it imports nothing from
``jaxsvr``) and favours readability over speed: every query is handled on its own with plain
Python loops over Python floats.

Conventions (both directions use the same per-query code):

* ``S`` (similarity) and ``R`` (relevance) have shape ``[n_videos, n_texts]``. Video-to-text
  (``v2t``) uses the rows of ``S``/``R`` as queries, text-to-video (``t2v``) uses the rows of
  ``S.T``/``R.T``.
* Items are ranked by score, descending. Ties in score are broken pessimistically: among equal
  scores the *least* relevant item comes first, so a model never gains from ties. ``-0.0`` and
  ``0.0`` compare equal. Rank positions start at 1.
* nDCG follows EPIC-KITCHENS-100: the sum is cut off after ``K`` positions, ``K`` being the number
  of items with ``r > 0``; ``ndcg_exp`` uses the gain ``2**r - 1``; ``ndcg_nocut`` uses linear
  gain without the cut-off in the DCG (the IDCG is the usual one).
* mAP follows EPIC-KITCHENS-100: an item is relevant iff ``r == 1`` exactly, and the precision
  numerator at position ``k`` adds up the *graded* relevance of the first ``k`` items.
  ``map_binary`` counts only the ``r == 1`` items in that numerator.
* Instance metrics (R@1/5/10 in percent, median / mean rank, geometric mean of the recalls) use
  the best-ranked item with ``r >= threshold``.
* Queries without any ``r > 0`` item are excluded from the nDCG variants, queries without an
  ``r == 1`` item from both mAPs, queries without a positive from the instance metrics. A metric
  whose queries are all excluded is ``None``.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np

_DIRECTIONS = ("v2t", "t2v")


def _ranking(s: list[float], r: list[float]) -> list[int]:
    """Item indices in rank order: score descending, ties by relevance ascending."""
    return sorted(range(len(s)), key=lambda j: (-s[j], r[j]))


def _dcg(gains: list[float], cutoff: int) -> float:
    """Sum of ``gains[p - 1] / log2(p + 1)`` over positions ``p = 1 .. cutoff``."""
    total = 0.0
    for p in range(1, cutoff + 1):
        total += gains[p - 1] / math.log2(p + 1)
    return total


def _query_ndcg(ranked_r: list[float], r: list[float]) -> tuple[float, float, float] | None:
    """(ndcg, ndcg_exp, ndcg_nocut) of one query, or None if it has no item with r > 0."""
    k = sum(1 for x in r if x > 0)
    if k == 0:
        return None
    ideal_r = sorted(r, reverse=True)

    idcg = _dcg(ideal_r, k)
    dcg = _dcg(ranked_r, k)

    idcg_exp = _dcg([2.0**x - 1.0 for x in ideal_r], k)
    dcg_exp = _dcg([2.0**x - 1.0 for x in ranked_r], k)

    dcg_nocut = _dcg(ranked_r, len(ranked_r))

    return dcg / idcg, dcg_exp / idcg_exp, dcg_nocut / idcg


def _query_ap(ranked_r: list[float], *, binary: bool) -> float | None:
    """Average precision of one query (relevant means r == 1), or None if nothing is relevant."""
    n_relevant = sum(1 for x in ranked_r if x == 1.0)
    if n_relevant == 0:
        return None
    cumulative = 0.0
    total = 0.0
    for k, x in enumerate(ranked_r, start=1):
        if binary:
            cumulative += 1.0 if x == 1.0 else 0.0
        else:
            cumulative += x
        if x == 1.0:
            total += cumulative / k
    return total / n_relevant


def _query_best_rank(ranked_r: list[float], threshold: float) -> int | None:
    """Smallest 1-based rank position of an item with r >= threshold, or None if there is none."""
    for position, x in enumerate(ranked_r, start=1):
        if x >= threshold:
            return position
    return None


def _query_worst_rank(ranked_r: list[float], threshold: float) -> int | None:
    """Largest 1-based rank position of an item with r >= threshold, or None."""
    found = [p for p, x in enumerate(ranked_r, start=1) if x >= threshold]
    return found[-1] if found else None


def _recalls(ranks: list[int], suffix: str = "") -> dict[str, Any]:
    """R@1/5/10 in percent and their geometric mean over the ranks of the queries."""
    if not ranks:
        return {f"{k}{suffix}": None for k in ("r1", "r5", "r10", "geomean")}
    n = len(ranks)
    r1, r5, r10 = (100.0 * sum(1 for b in ranks if b <= k) / n for k in (1, 5, 10))
    return {
        f"r1{suffix}": r1,
        f"r5{suffix}": r5,
        f"r10{suffix}": r10,
        f"geomean{suffix}": (r1 * r5 * r10) ** (1.0 / 3.0),
    }


def _mean(values: list[float]) -> float | None:
    """Mean in float64 (Python float), or None for an empty list."""
    if not values:
        return None
    return math.fsum(values) / len(values)


def _direction_metrics(
    s_mat: np.ndarray, r_mat: np.ndarray, threshold: float, bounds: bool = False
) -> dict[str, Any]:
    """All metrics of one direction; queries are the rows of ``s_mat`` / ``r_mat``."""
    ndcg: list[float] = []
    ndcg_exp: list[float] = []
    ndcg_nocut: list[float] = []
    ap: list[float] = []
    ap_binary: list[float] = []
    best_ranks: list[int] = []
    worst_ranks: list[int] = []
    excluded_ndcg = 0
    excluded_map = 0
    excluded_recall = 0

    for i in range(s_mat.shape[0]):
        s = [float(x) for x in s_mat[i]]
        r = [float(x) for x in r_mat[i]]
        ranked_r = [r[j] for j in _ranking(s, r)]

        nd = _query_ndcg(ranked_r, r)
        if nd is None:
            excluded_ndcg += 1
        else:
            ndcg.append(nd[0])
            ndcg_exp.append(nd[1])
            ndcg_nocut.append(nd[2])

        a = _query_ap(ranked_r, binary=False)
        if a is None:
            excluded_map += 1
        else:
            ap.append(a)
            ab = _query_ap(ranked_r, binary=True)
            assert ab is not None
            ap_binary.append(ab)

        best = _query_best_rank(ranked_r, threshold)
        if best is None:
            excluded_recall += 1
        else:
            best_ranks.append(best)
            worst_ranks.append(_query_worst_rank(ranked_r, threshold))

    out: dict[str, Any] = {
        "ndcg": _mean(ndcg),
        "ndcg_exp": _mean(ndcg_exp),
        "ndcg_nocut": _mean(ndcg_nocut),
        "map": _mean(ap),
        "map_binary": _mean(ap_binary),
        "excluded_ndcg": excluded_ndcg,
        "excluded_map": excluded_map,
        "excluded_recall": excluded_recall,
    }
    out.update(_recalls(best_ranks))
    out["medr"] = float(statistics.median(best_ranks)) if best_ranks else None
    out["meanr"] = _mean([float(b) for b in best_ranks])
    if bounds:
        out.update(_recalls(worst_ranks, "_lower"))
    return out


def reference_metrics(
    S: Any, R: Any, *, threshold: float = 1.0, bounds: bool = False
) -> dict[str, Any]:
    """Compute every retrieval metric the straightforward way, one query at a time.

    Args:
        S: Similarity matrix, array-like of shape ``[n_videos, n_texts]``.
        R: Relevance matrix with values in ``[0, 1]``, same shape as ``S``.
        threshold: Items with ``r >= threshold`` count as positives for the instance metrics
            (R@1/5/10, medr, meanr, geomean).

    Returns:
        Dict with, for each direction ``d`` in ``("v2t", "t2v")``: ``ndcg_d``, ``ndcg_exp_d``,
        ``ndcg_nocut_d``, ``map_d``, ``map_binary_d``, ``r1_d``, ``r5_d``, ``r10_d`` (percent),
        ``medr_d``, ``meanr_d``, ``geomean_d`` (floats, or None when every query is excluded),
        and ``excluded_ndcg_d``, ``excluded_map_d``, ``excluded_recall_d`` (ints). Also
        ``ndcg_avg``, ``ndcg_exp_avg``, ``ndcg_nocut_avg``, ``map_avg``, ``map_binary_avg``
        (mean of the two directions, None if either is None) and ``rsum`` (sum of the six
        recalls, None if any is None). With ``bounds``, the lower-bound recalls too:
        ``r1_lower_d`` ... ``geomean_lower_d`` from each query's worst-ranked positive,
        and ``rsum_lower``.
    """
    s_arr = np.asarray(S)
    r_arr = np.asarray(R)
    if s_arr.ndim != 2 or s_arr.shape != r_arr.shape:
        raise ValueError(
            f"S and R must be 2-D arrays of the same shape, got {s_arr.shape} and {r_arr.shape}"
        )

    per_direction = {
        "v2t": _direction_metrics(s_arr, r_arr, threshold, bounds),
        "t2v": _direction_metrics(s_arr.T, r_arr.T, threshold, bounds),
    }

    result: dict[str, Any] = {}
    for d in _DIRECTIONS:
        for name, value in per_direction[d].items():
            result[f"{name}_{d}"] = value

    for name in ("ndcg", "ndcg_exp", "ndcg_nocut", "map", "map_binary"):
        a = result[f"{name}_v2t"]
        b = result[f"{name}_t2v"]
        result[f"{name}_avg"] = None if a is None or b is None else (a + b) / 2.0

    for suffix in ("", "_lower") if bounds else ("",):
        recalls = [result[f"{k}{suffix}_{d}"] for d in _DIRECTIONS for k in ("r1", "r5", "r10")]
        result[f"rsum{suffix}"] = None if any(x is None for x in recalls) else math.fsum(recalls)
    return result
