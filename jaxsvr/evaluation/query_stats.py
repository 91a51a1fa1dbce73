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
    last_pos: np.ndarray  # int64 rank of the worst-ranked positive, 0 without positives
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
    "last_pos": np.int64,
    "tied": np.bool_,
}


@functools.lru_cache(maxsize=8)
def discounts(n_items: int) -> np.ndarray:
    """[n_items] float64 DCG discounts 1 / log2(p + 1) for 1-based positions p (read-only)."""
    table = 1.0 / np.log2(np.arange(n_items) + 2.0)
    table.flags.writeable = False
    return table


@functools.lru_cache(maxsize=8)
def cumulative_discounts(n_items: int) -> np.ndarray:
    """[n_items + 1] float64 D(p) = sum of the first p discounts, D(0) = 0 (read-only)."""
    table = np.zeros(n_items + 1)
    np.cumsum(discounts(n_items), out=table[1:])
    table.flags.writeable = False
    return table


def sparse_stats(
    count: np.ndarray, pos: np.ndarray, gain: np.ndarray, n_items: int, threshold: float
) -> dict[str, np.ndarray]:
    """Statistics of a ranked block of queries from its entries with r > 0.

    Args:
      count: [n_queries] int entries of each query (K, its relevant items).
      pos: [nnz] int 0-based rank position of each entry, grouped by query and increasing
        within a query (the entries of a query in rank order).
      gain: [nnz] float32 their relevance r > 0.
      n_items: items per query.
      threshold: relevance of an instance-metric positive.

    Returns:
      The QueryStats fields except `tied`, as [n_queries] arrays.
    """
    n_queries = count.size
    first = np.zeros(n_queries + 1, np.intp)  # each query's first entry
    np.cumsum(count, out=first[1:])
    table = discounts(n_items)
    per_query = _Segments(count, first[:-1])

    def query_of(entries: np.ndarray) -> np.ndarray:
        return np.searchsorted(first, entries, side="right") - 1

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
    # monotone: sort the complement of the bits under the query index). Equal gains of a
    # query form a run (EK-100 relevance takes 18 values): a run of gain g over ideal
    # positions [a, b) adds g * (D(b) - D(a)), D(p) the sum of the first p discounts.
    keys = np.repeat(np.arange(n_queries, dtype=np.uint64) << np.uint64(32), count)
    keys |= np.invert(gain.view(np.uint32))
    keys.sort()
    head = np.empty(keys.size, np.bool_)
    head[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=head[1:])
    run = np.flatnonzero(head)  # first entry of each run; a run ends where the next starts
    run_query = query_of(run)
    low = np.invert(keys[run].astype(np.uint32))  # the bits of each run's gain
    run_gain = low.view(np.float32).astype(np.float64)
    cum = cumulative_discounts(n_items)
    start = first[run_query]
    span = cum[np.append(run[1:], keys.size) - start] - cum[run - start]
    per_run = _Segments.grouped(run_query, n_queries)
    stats["idcg"] = per_run(run_gain * span)
    stats["idcg_exp"] = per_run((np.exp2(run_gain) - 1.0) * span)

    # AP over the r = 1 items: graded numerator (sum of r ranked at or above) and binary.
    ones = np.flatnonzero(gain == 1)
    one_row = query_of(ones)
    per_one = _Segments.grouped(one_row, n_queries)
    # Inclusive running sum of r within the query at each r = 1 entry: block-wide running
    # sums minus those before the query's first entry.
    total = np.zeros(g.size + 1)
    np.cumsum(g, out=total[1:])
    running = total[ones + 1] - total[first[one_row]]
    inv_rank = 1.0 / (pos[ones] + 1.0)
    nth_one = np.arange(1.0, ones.size + 1.0) - np.repeat(per_one.first, per_one.count)
    stats["ap_graded"] = per_one(running * inv_rank)
    stats["ap_binary"] = per_one(nth_one * inv_rank)

    positive = ones if threshold == 1 else np.flatnonzero(gain >= threshold)
    pos_row = one_row if threshold == 1 else query_of(positive)
    first_pos = np.zeros(n_queries, np.int64)
    last_pos = np.zeros(n_queries, np.int64)
    if pos_row.size:
        # Entries are in rank order within a query: its first and last positives.
        change = pos_row[1:] != pos_row[:-1]
        head = np.flatnonzero(np.r_[True, change])
        tail = np.flatnonzero(np.r_[change, True])
        first_pos[pos_row[head]] = pos[positive[head]] + 1
        last_pos[pos_row[tail]] = pos[positive[tail]] + 1
    stats.update(
        n_rel=count.astype(np.int64),
        n_one=per_one.count.astype(np.int64),
        n_pos=np.bincount(pos_row, minlength=n_queries).astype(np.int64),
        first_pos=first_pos,
        last_pos=last_pos,
    )
    return stats


class _Segments:
    """Per-query sums of entries grouped by query (`np.add.reduceat`: faster than a
    weighted bincount, docs/benchmarks.md#evaluation); queries without entries sum to 0."""

    def __init__(self, count: np.ndarray, first: np.ndarray):
        self.count, self.first = count, first  # entries of each query, its first entry
        self.nonempty = count > 0
        self.starts = first[self.nonempty]

    @classmethod
    def grouped(cls, query: np.ndarray, n_queries: int) -> _Segments:
        """Segments of entries whose (non-decreasing) query indices are `query`."""
        count = np.bincount(query, minlength=n_queries)
        first = np.zeros(n_queries, np.intp)
        np.cumsum(count[:-1], out=first[1:])
        return cls(count, first)

    def __call__(self, values: np.ndarray) -> np.ndarray:
        out = np.zeros(self.nonempty.size)
        if self.starts.size:
            out[self.nonempty] = np.add.reduceat(values, self.starts)
        return out
