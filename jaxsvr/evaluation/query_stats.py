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


def discounts(n_items: int) -> np.ndarray:
    """[n_items] float64 DCG discounts 1 / log2(p + 1) for 1-based positions p."""
    return 1.0 / np.log2(np.arange(n_items) + 2.0)


def sparse_stats(
    flat: np.ndarray, gain: np.ndarray, n_queries: int, n_items: int, threshold: float
) -> dict[str, np.ndarray]:
    """Statistics of a ranked block of queries from its entries with r > 0.

    Args:
      flat: [nnz] int64 increasing positions query * n_items + rank_position (0-based)
        of the items with r > 0, i.e. `np.flatnonzero` of the ranked relevance block.
      gain: [nnz] float32 their relevance r > 0.
      n_queries: queries in the block.
      n_items: items per query.
      threshold: relevance of an instance-metric positive.

    Returns:
      The QueryStats fields except `tied`, as [n_queries] arrays.
    """
    row, pos = np.divmod(flat, n_items)
    count = np.bincount(row, minlength=n_queries)
    first_entry = np.zeros(n_queries, np.int64)
    np.cumsum(count[:-1], out=first_entry[1:])
    offset = np.repeat(first_entry, count)  # [nnz] index of the query's first entry
    table = discounts(n_items)

    g = gain.astype(np.float64)
    one = (gain == 1).astype(np.float64)
    positive = gain >= threshold
    discount = table[pos]
    cut_discount = discount * (pos < count[row])  # only the first K positions count
    inv_rank = 1.0 / (pos + 1.0)
    # Ideal ranking: gains sorted descending within each query (r > 0, so float bits are
    # monotone: sort the complement of the bits under the query index).
    keys = row.astype(np.uint64) << np.uint64(32)
    keys |= np.invert(gain.view(np.uint32))
    keys.sort()
    ideal = np.invert(keys.astype(np.uint32)).view(np.float32).astype(np.float64)
    ideal_discount = table[np.arange(flat.size) - offset]

    weights = np.empty((9, flat.size))
    weights[0] = g * cut_discount  # dcg
    weights[1] = (np.exp2(g) - 1.0) * cut_discount  # dcg_exp
    weights[2] = g * discount  # dcg_nocut
    weights[3] = ideal * ideal_discount  # idcg
    weights[4] = (np.exp2(ideal) - 1.0) * ideal_discount  # idcg_exp
    weights[5] = one * _running_sum(g, offset) * inv_rank  # ap_graded
    weights[6] = one * _running_sum(one, offset) * inv_rank  # ap_binary
    weights[7] = one
    weights[8] = positive
    sums = np.zeros((9, n_queries))
    nonempty = count > 0
    if flat.size:
        sums[:, nonempty] = np.add.reduceat(weights, first_entry[nonempty], axis=1)

    first_pos = np.zeros(n_queries, np.int64)
    pos_rows = row[positive]
    if pos_rows.size:
        # Entries are in rank order within a query: the first positive of each query.
        head = np.flatnonzero(np.r_[True, pos_rows[1:] != pos_rows[:-1]])
        first_pos[pos_rows[head]] = pos[positive][head] + 1
    names = ("dcg", "dcg_exp", "dcg_nocut", "idcg", "idcg_exp", "ap_graded", "ap_binary")
    stats = dict(zip(names, sums[:7]))
    stats.update(
        n_rel=count.astype(np.int64),
        n_one=np.rint(sums[7]).astype(np.int64),
        n_pos=np.rint(sums[8]).astype(np.int64),
        first_pos=first_pos,
    )
    return stats


def _running_sum(values: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """Inclusive cumulative sum restarting at each query's first entry."""
    total = np.cumsum(values)
    if total.size:
        total -= total[offset] - values[offset]
    return total
