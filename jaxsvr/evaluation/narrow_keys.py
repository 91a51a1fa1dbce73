"""The NumPy engine's 32-bit path: rank a block of queries with one uint32 row sort.

NumPy sorts 32-bit keys several times faster than 64-bit ones, most of all with its AVX2
code (docs/benchmarks.md#evaluation), so this path keeps the row sort at 32 bits and pays
for the relevance separately:

1. Each similarity becomes a 31-bit key whose order is *descending* similarity (the
   folded bits of 0 - s, as in the packed path, minus the block's smallest), shifted left
   by one; the low bit is 1 where R > 0. Equal similarities sort non-relevant items first,
   the pessimistic tie rule for R = 0 against R > 0. This needs the block's keys to span
   < 2^31 values: cosine similarities in [-1, 1] and any scores of one sign always do;
   blocks that do not (mixed signs beyond about +-1) take the packed 64-bit path.
2. One uint32 sort per row; the flagged positions are the ranks of the relevant items.
3. Which relevant item sits at each flagged position comes from a second, small sort of
   the relevant entries alone (about 11% at EK-100) by (query, key, entry): the j-th
   entry of a query in that order is at its j-th flagged position. Relevant items with
   equal similarity get their gains in ascending order (the tie rule among R > 0).
4. `query_stats.sparse_stats` as in the packed path.

Text-to-video blocks copy the relevance's columns as they copy the similarity's, in
tiles of the transposed view (`numpy_engine._copy`; a quarter cheaper than reading the
column stripe in its own layout, docs/benchmarks.md#evaluation), and find the relevant
entries as row blocks do (`row_entries`).
"""

from __future__ import annotations

import numpy as np

from jaxsvr.evaluation.query_stats import sparse_stats

_MAGNITUDE = np.int32(0x7FFFFFFF)
_SPAN = 2**31  # key values a block may span (one bit is the relevance flag)


class Buffers:
    """Per-thread scratch for blocks of up to `size` items, reused across blocks (fresh
    temporaries per block would go back to the OS and fault in again)."""

    def __init__(self, size: int):
        self.keys = np.empty(size, np.int32)
        self.scratch = np.empty(size, np.int32)  # folding, a relevance block, neighbour tests
        self.mask = np.empty(size, np.bool_)
        # the sort of the relevant entries (at most `size` of them)
        self.order = np.empty(size, np.uint64)
        self.wide = np.empty(size, np.uint64)
        self.entry = np.arange(size, dtype=np.uint64)
        self.flagged = np.empty(size, np.uint32)
        self.gain = np.empty(size, np.float32)
        self.tied = np.empty(size, np.bool_)

    def shaped(self, n: int, n_items: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        size = n * n_items
        return tuple(a[:size].reshape(n, n_items) for a in (self.keys, self.scratch, self.mask))


def folded_keys(s: np.ndarray, keys: np.ndarray, scratch: np.ndarray, copy) -> tuple[int, int]:
    """keys = signed-monotone bits of 0 - s (ascending = descending similarity); returns
    the smallest and largest key. `copy(src, out, negate=True)` writes 0 - src."""
    copy(s, keys.view(np.float32), negate=True)
    np.right_shift(keys, 31, out=scratch)
    np.bitwise_and(scratch, _MAGNITUDE, out=scratch)
    np.bitwise_xor(keys, scratch, out=keys)
    return int(keys.min()), int(keys.max())


def fits(lo: int, hi: int) -> bool:
    """Whether keys in [lo, hi] span < 2^31 values (one bit is left for the flag)."""
    return hi - lo < _SPAN


def packs(n: int, nnz: int) -> bool:
    """Whether (query, key, entry) of nnz relevant entries of n queries packs into 64 bits:
    always in blocks of a few MB, but for blocks of rows of a few dozen items that hold
    hundreds of thousands of relevant ones (those take the packed path)."""
    return (n - 1).bit_length() + 32 + nnz.bit_length() <= 64


def block_stats(
    keys: np.ndarray,
    lo: int,
    entries: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    threshold: float,
    buf: Buffers,
) -> dict:
    """Statistics of a block from its folded keys (`folded_keys`, [n, n_items], consumed).

    Args:
      keys: [n, n_items] int32 folded keys of the block, in `buf.keys`.
      lo: their smallest value.
      entries: the block's relevant items, in any order: (count [n] per query, query
        [nnz], flat index query * n_items + item [nnz], gain [nnz] float32 > 0); `packs`.
      threshold: relevance of an instance-metric positive.
      buf: the thread's scratch (`keys` must be its `keys`).
    """
    n, n_items = keys.shape
    _, scratch, mask = buf.shaped(n, n_items)
    count, query, flat, gain = entries
    nnz = flat.size
    u = keys.view(np.uint32)
    np.subtract(keys, np.int32(lo), out=keys)  # wraps into [0, 2^31) as uint32
    np.left_shift(u, 1, out=u)
    flagged = np.take(u.ravel(), flat, out=buf.flagged[:nnz])
    flagged |= np.uint32(1)
    u.ravel()[flat] = flagged

    # The relevant entries in rank order: sort (query, key, entry index) packed in 64 bits.
    bits = max(1, nnz.bit_length())
    order, wide = buf.order[:nnz], buf.wide[:nnz]
    query = query.astype(np.int64, copy=False).view(np.uint64)
    np.left_shift(query, np.uint64(32 + bits), out=order)
    np.copyto(wide, flagged)
    np.left_shift(wide, np.uint64(bits), out=wide)
    order |= wide
    order |= buf.entry[:nnz]
    order.sort()
    np.bitwise_and(order, np.uint64((1 << bits) - 1), out=wide)
    gain = np.take(gain, wide.view(np.int64), out=buf.gain[:nnz])
    order >>= np.uint64(bits)
    tied_relevant = buf.tied[: max(nnz - 1, 0)]
    np.equal(order[1:], order[:-1], out=tied_relevant)
    if tied_relevant.any():  # equal similarity among R > 0: ascending gains
        head = np.ones(nnz, np.bool_)
        np.logical_not(tied_relevant, out=head[1:])
        gain = gain[np.lexsort((gain, np.cumsum(head)))]

    u.sort(axis=1)
    # Tied: sorted neighbours whose keys differ at most in the flag bit (a row minimum:
    # one pass fewer than a mask and `any`).
    x = scratch.view(np.uint32)
    np.bitwise_xor(u[:, 1:], u[:, :-1], out=x[:, 1:])
    tied = x[:, 1:].min(axis=1, initial=2) <= 1
    # Flagged positions through contiguous 32-bit passes (a strided read of the low bytes
    # is not vectorised: docs/benchmarks.md#evaluation).
    np.bitwise_and(u, np.uint32(1), out=x)
    np.not_equal(x, 0, out=mask)
    pos = np.flatnonzero(mask)  # flagged positions, grouped by query, ascending
    pos -= np.repeat(np.arange(0, n * n_items, n_items), count)  # within the query
    stats = sparse_stats(count, pos, gain, n_items, threshold)
    stats["tied"] = tied
    return stats


def row_entries(r: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, ...]:
    """Relevant entries of a block of contiguous query rows r [n, n_items]."""
    n, n_items = r.shape
    np.not_equal(r, 0, out=mask)
    flat = np.flatnonzero(mask)
    count = np.diff(np.searchsorted(flat, np.arange(0, n * n_items + 1, n_items)))
    query = np.repeat(np.arange(n), count)
    return count, query, flat, r.ravel()[flat]
