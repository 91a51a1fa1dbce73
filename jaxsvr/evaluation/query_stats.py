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
import math

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

    # Gains are widened to float64 inside the ufuncs (exactly, without a float64 copy).
    disc = table[pos]
    beyond = pos >= np.repeat(count, count)  # only the first K positions count
    linear = np.multiply(gain, disc)
    coded = _few_gains(gain, count)  # None: too many distinct gains
    if coded is None:
        exp = np.exp2(gain, dtype=np.float64)
        exp -= 1.0
        runs = _sorted_runs(gain, count, first)
    else:  # 2^r - 1 of each distinct gain, gathered: the same values, one exp2 per gain
        exp, runs = coded
    exp *= disc
    stats = {"dcg_nocut": per_query(linear)}
    linear[beyond] = 0.0
    exp[beyond] = 0.0
    stats["dcg"], stats["dcg_exp"] = per_query(linear), per_query(exp)

    # Ideal ranking: gains sorted descending within each query. Equal gains of a query form
    # a run (EK-100 relevance takes 18 values): a run of gain g over ideal positions [a, b)
    # adds g * (D(b) - D(a)), D(p) the sum of the first p discounts.
    run_query, run_gain, run_exp, a, b = runs
    cum = cumulative_discounts(n_items)
    span = cum[b] - cum[a]
    per_run = _Segments.grouped(run_query, n_queries)
    stats["idcg"] = per_run(run_gain * span)
    stats["idcg_exp"] = per_run(run_exp * span)

    # AP over the r = 1 items: graded numerator (sum of r ranked at or above) and binary.
    ones = np.flatnonzero(gain == 1)
    one_row = query_of(ones)
    per_one = _Segments.grouped(one_row, n_queries)
    running = _running_sums(gain, first, ones, one_row, per_one)
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


def positive_ranks(sim: np.ndarray, count: np.ndarray, items: np.ndarray) -> dict:
    """n_pos, first_pos and last_pos of a block of queries against binary positives,
    without ranking: the values a ranking with the positives as relevance (threshold 1)
    gives, under the shared ranking rule (equal similarity: non-positives first).

    The best positive's rank is 1 + #{s > best} + #{s = best, not a positive}, that is
    1 + #{s >= best} - #{positives = best}; the worst one's is #{s >= worst} (the positives
    tied with it come before it or with it). One or two comparisons of the block against
    a value per query (one where every query's positives share a score: a single positive
    each, as at EK-100), instead of a sort.

    Args:
      sim: [n, n_items] float32 similarities of the block's queries, finite.
      count: [n] positives of each query; items: [sum(count)] their item indices, grouped
        by query (`blocks.Positives.block`).
    """
    n = len(count)
    out = {f: np.zeros(n, np.int64) for f in ("n_pos", "first_pos", "last_pos")}
    out["n_pos"][:] = count
    has = count > 0
    if not has.any():
        return out
    query = np.repeat(np.arange(n), count)
    value = sim[query, items]
    starts = np.cumsum(count) - count
    best, worst = np.zeros(n, sim.dtype), np.zeros(n, sim.dtype)
    best[has] = np.maximum.reduceat(value, starts[has])
    worst[has] = np.minimum.reduceat(value, starts[has])
    rows = sim if has.all() else sim[has]
    best_tied = np.bincount(query[value == best[query]], minlength=n)[has]
    at_best = np.count_nonzero(rows >= best[has, None], axis=1)
    out["first_pos"][has] = 1 + at_best - best_tied
    same = np.array_equal(best, worst)  # -0.0 equals 0.0 here too
    out["last_pos"][has] = at_best if same else np.count_nonzero(rows >= worst[has, None], axis=1)
    return out


def _sorted_runs(gain: np.ndarray, count: np.ndarray, first: np.ndarray) -> tuple:
    """Runs of equal gain of each query in descending order, by one sort of all entries
    (r > 0, so float bits are monotone: sort the complement of the bits under the query
    index): (query, gain, 2^gain - 1, first and end ideal position within the query)."""
    keys = np.repeat(np.arange(count.size, dtype=np.uint64) << np.uint64(32), count)
    keys |= np.invert(gain.view(np.uint32))
    keys.sort()
    head = np.empty(keys.size, np.bool_)
    head[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=head[1:])
    run = np.flatnonzero(head)  # first entry of each run; a run ends where the next starts
    run_query = np.searchsorted(first, run, side="right") - 1
    low = np.invert(keys[run].astype(np.uint32))  # the bits of each run's gain
    run_gain = low.view(np.float32).astype(np.float64)
    start = first[run_query]
    return (
        run_query,
        run_gain,
        np.exp2(run_gain) - 1.0,
        run - start,
        np.append(run[1:], keys.size) - start,
    )


_SLOT_BITS = 12  # hash slots of the distinct gains: a few dozen rarely share one of 4096
_HASH = np.uint32(0x9E3779B1)  # Fibonacci hashing: the top bits of bits * 2^32 / phi


def _few_gains(gain: np.ndarray, count: np.ndarray) -> tuple | None:
    """2^r - 1 of every entry and the ideal ranking's runs (as `_sorted_runs`), where a
    block's gains take few distinct values (EK-100's class relevance takes 18); None where
    two distinct gains share a hash slot, there are more than 255, or the (query, gain)
    counts would outgrow the entries.

    The distinct gains are found through a small hash table of their bits; exp2 (the
    costliest ufunc of the statistics without AVX-512) is then computed once per distinct
    gain and gathered, and the runs are counted per (query, gain) instead of sorted. Both
    give the sorted path's values bit for bit: the same float operations on the same
    values.

    Args:
      gain: [nnz] float32 > 0, grouped by query.
      count: [n_queries] entries of each query.
    """
    if not gain.size:
        return None
    bits = gain.view(np.uint32)
    slot = np.multiply(bits, _HASH, dtype=np.uint32)  # wraps
    slot = np.right_shift(slot, np.uint32(32 - _SLOT_BITS), out=slot).astype(np.intp)
    table = np.zeros(1 << _SLOT_BITS, np.uint32)  # 0: free (a gain > 0 has bits)
    table[slot] = bits
    check = table.take(slot)
    check ^= bits
    if check.any():  # distinct gains in one slot
        return None
    used = np.flatnonzero(table)
    n_queries, n_codes = count.size, used.size
    if n_codes > 255 or n_codes * n_queries > max(gain.size, 1 << 16):
        return None
    used = used[np.argsort(table[used])[::-1]]  # descending bits: descending gains
    values = table[used].view(np.float32).astype(np.float64)  # [n_codes]
    exp_values = np.exp2(values) - 1.0
    per_slot = np.zeros(table.size)
    per_slot[used] = exp_values
    exp = per_slot.take(slot)
    # Runs: per query, the entries of each code (the rank of a gain, descending).
    code = np.zeros(table.size, np.uint8)
    code[used] = np.arange(n_codes)
    key = np.repeat(np.arange(0, n_queries * n_codes, n_codes), count)
    key += code.take(slot)
    counts = np.bincount(key, minlength=n_queries * n_codes).reshape(n_queries, n_codes)
    stop = np.cumsum(counts, axis=1)
    run_query, run_code = np.nonzero(counts)
    b = stop[run_query, run_code]
    a = b - counts[run_query, run_code]
    return exp, (run_query, values[run_code], exp_values[run_code], a, b)


def _running_sums(gain, first, ones, one_row, per_one) -> np.ndarray:
    """Inclusive running sum of r within the query at each r = 1 entry (`ones`, of queries
    `one_row`), in float64.

    Block-wide running sums (one sequential cumsum over every entry) minus those before
    the query's first entry; or, where every partial sum of the gains is exact in float64
    (`_exact_sums`), and so equal whatever the order of additions, the sums of the
    stretches that end at each r = 1 entry (one vectorised `np.add.reduceat`) accumulated
    over the r = 1 entries alone.
    """
    if not ones.size:
        return np.zeros(0)
    if not _exact_sums(float(gain.min()), float(gain.max()), gain.size):
        total = np.zeros(gain.size + 1)
        np.cumsum(gain, dtype=np.float64, out=total[1:])
        return total[ones + 1] - total[first[one_row]]
    lead = np.empty(ones.size, np.bool_)  # the first r = 1 entry of its query
    lead[:1] = True
    np.not_equal(one_row[1:], one_row[:-1], out=lead[1:])
    start = np.empty(ones.size, np.intp)  # each stretch: after the previous r = 1 entry
    start[1:] = ones[:-1] + 1
    start[lead] = first[one_row[lead]]
    bounds = np.empty(2 * ones.size, np.intp)
    bounds[0::2], bounds[1::2] = start, ones + 1
    if bounds[-1] == gain.size:
        bounds = bounds[:-1]
    part = np.add.reduceat(gain, bounds, dtype=np.float64)[0::2]  # odd: between stretches
    running = np.cumsum(part)
    before = running[lead] - part[lead]  # the sums of earlier queries' stretches
    running -= np.repeat(before, per_one.count[per_one.nonempty])
    return running


def _exact_sums(lo: float, hi: float, n: int) -> bool:
    """Whether every sum of up to n float32 values in [lo, hi] (0 < lo) is exact in float64:
    all are multiples of the lowest bit of lo's binade (normal or subnormal), and n * hi
    is at most 2^53 of those (counted in integers: no rounding)."""
    lowest = max(math.frexp(lo)[1] - 1, -126) - 23  # float32: 24 significant bits
    return n * int(math.ldexp(hi, -lowest)) <= 2**53


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
