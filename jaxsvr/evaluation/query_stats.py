"""Per-query ranking statistics: the common output of every evaluation engine.

An engine (NumPy on CPU, jitted JAX on accelerators) ranks each query's items and reduces
the ranking to a few numbers per query; `jaxsvr.evaluation.metrics` turns them into nDCG,
mAP, recall and ranks. Keeping this boundary small lets both engines be checked against
each other and against plain loops, and lets the reduction (exclusions, means) live once.

Ranking rule, shared by all engines: items are sorted by similarity descending; items with
equal similarity are ordered by relevance ascending (pessimistic: a model never gains from a
tie, so a constant similarity matrix gets the worst score). -0.0 equals 0.0. On tie-free
inputs this is the ranking of the official EPIC-KITCHENS-100 evaluation.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np


@dataclasses.dataclass
class QueryStats:
    """Statistics of n queries; every field is an array of shape [n].

    Positions p below are 1-based ranks; r(p) is the relevance of the item ranked p;
    K = #{items with r > 0}; n1 = #{items with r = 1}.
    """

    n_rel: np.ndarray  # int64 K, the nDCG cut-off
    n_one: np.ndarray  # int64 n1
    n_pos: np.ndarray  # int64 #{r >= threshold}, positives of the instance metrics
    dcg: np.ndarray  # sum_{p <= K} r(p) / log2(p + 1)
    dcg_exp: np.ndarray  # sum_{p <= K} (2^r(p) - 1) / log2(p + 1)
    dcg_nocut: np.ndarray  # sum_p r(p) / log2(p + 1)
    idcg: np.ndarray  # dcg of the ideal ranking (r sorted descending); same with any cut-off
    idcg_exp: np.ndarray
    ap_graded: np.ndarray  # sum_{p: r(p) = 1} (sum_{l <= p} r(l)) / p   (EK-100 numerator)
    ap_binary: np.ndarray  # sum_{p: r(p) = 1} #{l <= p: r(l) = 1} / p
    first_pos: np.ndarray  # int64 rank of the best-ranked positive, 0 without positives
    tied: np.ndarray  # bool: some items of the query share a similarity value

    @classmethod
    def empty(cls, n: int) -> QueryStats:
        """Zero statistics for n queries, to be filled block by block."""
        return cls(
            **{
                f.name: np.zeros(n, _DTYPES.get(f.name, np.float64))
                for f in dataclasses.fields(cls)
            }
        )

    def __len__(self) -> int:
        return self.n_rel.size

    def put(self, start: int, values: dict[str, np.ndarray]) -> None:
        """Writes the statistics of queries start, start + 1, ... ."""
        for name, value in values.items():
            getattr(self, name)[start : start + value.size] = value


_DTYPES = {
    "n_rel": np.int64,
    "n_one": np.int64,
    "n_pos": np.int64,
    "first_pos": np.int64,
    "tied": np.bool_,
}


@functools.lru_cache(maxsize=8)
def discounts(n_items: int) -> np.ndarray:
    """[n_items] float64 DCG discounts 1 / log2(p + 1) for 1-based positions p (read-only)."""
    table = 1.0 / np.log2(np.arange(n_items) + 2.0)
    table.flags.writeable = False
    return table


def sparse_stats(
    row: np.ndarray,
    pos: np.ndarray,
    gain: np.ndarray,
    n_queries: int,
    n_items: int,
    threshold: float,
) -> dict[str, np.ndarray]:
    """Statistics of a ranked block of queries from its entries with r > 0.

    Args:
      row: [nnz] int query of each entry, non-decreasing.
      pos: [nnz] int 0-based rank position of each entry, increasing within a query (the
        entries of a query in rank order).
      gain: [nnz] float32 their relevance r > 0.
      n_queries: queries in the block.
      n_items: items per query.
      threshold: relevance of an instance-metric positive.

    Returns:
      The QueryStats fields except `tied`, as [n_queries] arrays.
    """
    count = np.bincount(row, minlength=n_queries)  # K: relevant items of each query
    first = np.zeros(n_queries + 1, np.intp)  # each query's first entry
    np.cumsum(count, out=first[1:])
    table = discounts(n_items)
    per_query = _Segments(count, first[:-1])

    g = gain.astype(np.float64)
    disc = table[pos]
    beyond = pos >= np.repeat(count, count)  # only the first K positions count
    linear = g * disc
    exp = np.exp2(g)
    exp -= 1.0
    exp *= disc
    stats = {"dcg_nocut": per_query(linear)}
    linear[beyond] = 0.0
    exp[beyond] = 0.0
    stats["dcg"], stats["dcg_exp"] = per_query(linear), per_query(exp)

    # Ideal ranking: gains sorted descending within each query (r > 0, so float bits are
    # monotone: sort the complement of the bits under the query index).
    keys = row.astype(np.uint64) << np.uint64(32)
    keys |= np.invert(gain.view(np.uint32))
    keys.sort()
    ideal = np.invert(keys.astype(np.uint32)).view(np.float32).astype(np.float64)
    ideal_disc = table[np.arange(row.size) - np.repeat(first[:-1], count)]
    stats["idcg"] = per_query(ideal * ideal_disc)
    np.exp2(ideal, out=ideal)
    ideal -= 1.0
    ideal *= ideal_disc
    stats["idcg_exp"] = per_query(ideal)

    # AP over the r = 1 items: graded numerator (sum of r ranked at or above) and binary.
    ones = np.flatnonzero(gain == 1)
    one_row = row[ones]
    one_count = np.bincount(one_row, minlength=n_queries)
    one_first = np.zeros(n_queries, np.intp)
    np.cumsum(one_count[:-1], out=one_first[1:])
    # Inclusive running sum of r within each query: block-wide sums minus the query's start.
    total = np.zeros(g.size + 1)
    np.cumsum(g, out=total[1:])
    running = total[1:] - np.repeat(total[first[:-1]], count)
    inv_rank = 1.0 / (pos[ones] + 1.0)
    nth_one = np.arange(1.0, ones.size + 1.0) - np.repeat(one_first, one_count)
    per_one = _Segments(one_count, one_first)
    stats["ap_graded"] = per_one(running[ones] * inv_rank)
    stats["ap_binary"] = per_one(nth_one * inv_rank)

    positive = ones if threshold == 1 else np.flatnonzero(gain >= threshold)
    pos_row = row[positive]
    first_pos = np.zeros(n_queries, np.int64)
    if pos_row.size:
        # Entries are in rank order within a query: the first positive of each query.
        head = np.flatnonzero(np.r_[True, pos_row[1:] != pos_row[:-1]])
        first_pos[pos_row[head]] = pos[positive[head]] + 1
    stats.update(
        n_rel=count.astype(np.int64),
        n_one=one_count.astype(np.int64),
        n_pos=np.bincount(pos_row, minlength=n_queries).astype(np.int64),
        first_pos=first_pos,
    )
    return stats


class _Segments:
    """Per-query sums of entries grouped by query (`np.add.reduceat`, 15x faster than a
    weighted bincount); queries without entries sum to 0."""

    def __init__(self, count: np.ndarray, first: np.ndarray):
        self.nonempty = count > 0
        self.starts = first[self.nonempty]

    def __call__(self, values: np.ndarray) -> np.ndarray:
        out = np.zeros(self.nonempty.size)
        if self.starts.size:
            out[self.nonempty] = np.add.reduceat(values, self.starts)
        return out
