"""CPU evaluation engine: one SIMD row sort per query, then sparse statistics.

`query_stats(sim, rel)` gives the per-query statistics (`query_stats.QueryStats`) of
video-to-text (rows) and text-to-video (columns) that `jaxsvr.evaluation.metrics` turns
into nDCG, mAP and recalls. Blocks of about 4 MB of keys go to a few threads as they
free up (NumPy's sort and ufuncs release the GIL); text-to-video blocks read S and R
through transposed views in tiles, so no transposed copy is made. Each block is ranked
by one `np.sort` per row of integer keys, in one of two ways with the same statistics
bit for bit (tested) and the same tie rule (equal similarity: less relevant first):

- **32-bit keys** (`narrow_keys`, the default; blocks whose keys span < 2^31 values, as
  cosine similarities in [-1, 1] and scores of one sign do): the similarity's order
  shifted left by one, with the low bit set where R > 0; NumPy sorts 32-bit keys several
  times faster than 64-bit ones.
- **Packed 64-bit keys** (the other blocks, or `narrow=False`; `_block_stats`): the
  similarity's order-preserving bits in the high half of an int64, the relevance's float
  bits in the low half, so the sorted keys carry the ranked relevance: no argsort, no
  gather, and ties are neighbours with equal high halves.

Only items with R > 0 enter any metric (about 11% at EK-100), so after the sort only those
entries are visited (`query_stats.sparse_stats`).

Where it was built (`pip install`), the compiled kernel (`compiled_kernel`, C) ranks the
32-bit path's blocks instead: the same keys and row sort, with every other pass fused into
two C loops, and the same statistics bit for bit (tested); blocks it leaves (keys too wide,
more than 255 distinct gains) take the NumPy passes above. `compiled=False` (or
JAXSVR_COMPILED_KERNEL=0) turns it off. Timings, where the time goes and the variants
measured and dropped: docs/benchmarks.md#evaluation.
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from jaxsvr.evaluation import compiled_kernel, narrow_keys
from jaxsvr.evaluation.query_stats import QueryStats, sparse_stats

_BLOCK_BYTES = 4 << 20  # packed keys per block: cache-sized; fresh large buffers cost page faults
_TILE = 512  # items per tile when a block is read through a transposed view
_LO, _HI = (0, 1) if sys.byteorder == "little" else (1, 0)  # int32 halves of an int64
_MAGNITUDE = np.int32(0x7FFFFFFF)
_ZERO = np.float32(0.0)


def query_stats(
    sim: np.ndarray,
    rel: np.ndarray,
    *,
    threshold: float = 1.0,
    workers: int | None = None,
    narrow: bool = True,
    compiled: bool | None = None,
) -> tuple[QueryStats, QueryStats]:
    """Per-query statistics for video-to-text (rows) and text-to-video (columns).

    Args:
      sim: [n_videos, n_texts] float32 similarities, finite.
      rel: [n_videos, n_texts] float32 relevance in [0, 1].
      threshold: relevance of a positive for the instance metrics.
      workers: threads; default min(4, cpu count).
      narrow: rank blocks whose keys allow it with the 32-bit path (`narrow_keys`);
        False ranks every block with the packed 64-bit sort (same results).
      compiled: with `narrow`, take the compiled kernel (`compiled_kernel`) where it is
        built (None), never (False), or insist on it (True); same results.

    Returns:
      (v2t, t2v) statistics with n_videos and n_texts queries.
    """
    sim = np.asarray(sim, np.float32)
    rel = np.asarray(rel, np.float32)
    threshold = float(threshold)  # compared with the float32 relevance in float32
    kernel = compiled_kernel.required(compiled) if narrow else None
    workers = workers or min(4, os.cpu_count() or 1)
    out = (QueryStats.empty(sim.shape[0]), QueryStats.empty(sim.shape[1]))
    jobs = []  # (direction, first query)
    rows = []  # block rows of each direction
    for d, (n_queries, n_items) in enumerate((sim.shape, sim.shape[::-1])):
        rows.append(block_rows(n_items))
        jobs += [(d, start) for start in range(0, n_queries, rows[d])]
    size = max(rows[0] * sim.shape[1], rows[1] * sim.shape[0])  # items of the largest block
    local = threading.local()  # per-thread scratch, reused across blocks of both directions

    def work(job: tuple[int, int]) -> None:
        d, start = job
        block = np.s_[start : start + rows[d]]
        s, r = (sim[block], rel[block]) if d == 0 else (sim.T[block], rel.T[block])
        stats, folded = None, None
        if kernel is not None:
            stats = _compiled_block_stats(kernel, s, r, threshold, local, size)
        if stats is None and narrow:
            stats, folded = _narrow_block_stats(s, rel, d, block, threshold, local, size)
        if stats is None:  # keys spanning >= 2^31 values, or asked: the packed sort
            if not hasattr(local, "packed"):
                local.packed = _Buffers(size)
            stats = _block_stats(s, r, threshold, local.packed, folded)
        out[d].put(start, stats)

    if workers == 1 or len(jobs) == 1:
        for job in jobs:
            work(job)
    else:  # blocks are handed out as threads free up (text-to-video ones cost more)
        with ThreadPoolExecutor(min(workers, len(jobs))) as pool:
            list(pool.map(work, jobs))  # re-raises errors
    return out


def block_rows(n_items: int) -> int:
    """Queries per block for queries of `n_items` items: about 4 MB of keys, at least 8.

    The per-query statistics depend on the block a query is ranked in (running sums over
    the block, in the last bits), so a caller that builds blocks itself (the streamed
    evaluation) uses these blocks to give the dense path's numbers bit for bit.
    """
    return max(8, _BLOCK_BYTES // (8 * max(n_items, 1)))


class RowBlocks:
    """Ranks blocks of query rows that the caller builds (`jaxsvr.evaluation.streamed`),
    as `query_stats` ranks its blocks, with scratch reused across blocks: one per thread.

    Example:
      ranker = RowBlocks(block_rows(n_items) * n_items)
      stats = ranker(s, r)  # s, r: [n, n_items] float32, C-contiguous; n * n_items <= size
    """

    def __init__(self, size: int, *, narrow: bool = True, compiled: bool | None = None):
        self.size, self.use_narrow = size, narrow
        self.kernel = compiled_kernel.required(compiled) if narrow else None

    def __call__(self, s: np.ndarray, r: np.ndarray, threshold: float = 1.0) -> dict:
        """The QueryStats fields of the rows of s (similarities) against r (relevance)."""
        threshold = float(threshold)
        if self.kernel is not None:
            stats = _compiled_block_stats(self.kernel, s, r, threshold, self, self.size)
            if stats is not None:
                return stats
        folded = None
        if self.use_narrow:  # attributes `narrow` / `packed`: the scratch of `query_stats`
            stats, folded = _narrow_block_stats(s, r, 0, np.s_[:], threshold, self, self.size)
            if stats is not None:
                return stats
        if not hasattr(self, "packed"):
            self.packed = _Buffers(self.size)
        return _block_stats(s, r, threshold, self.packed, folded)


def _compiled_block_stats(kernel, s, r, threshold, local, size) -> dict | None:
    """Statistics of a block by the compiled kernel, or None where it leaves the block to
    the NumPy passes (also blocks of another dtype than native float32, which only direct
    `RowBlocks` callers pass); blocks it cannot read in place are copied first: transposed
    views by the kernel's 8 x 8 register transposes, others (unaligned) by `_copy`.
    After one block with too many distinct gains (continuous relevance), the thread's
    later blocks go straight to the NumPy passes."""
    if getattr(local, "many_gains", False) or not compiled_kernel.float32(s, r):
        return None
    if not hasattr(local, "compiled"):
        local.compiled = compiled_kernel.Scratch(size)
    if not compiled_kernel.in_place(s, r):
        s_rows, r_rows = local.compiled.rows(*s.shape)
        for src, out in ((s, s_rows), (r, r_rows)):
            if not compiled_kernel.copy_columns(kernel, src, out):
                _copy(src, out)
        s, r = s_rows, r_rows
    stats = compiled_kernel.block_stats(kernel, s, r, threshold, local.compiled)
    if stats is None and compiled_kernel.many_gains(local.compiled):
        local.many_gains = True
    return stats


def _narrow_block_stats(s, rel, d, block, threshold, local, size) -> tuple:
    """(statistics of a block by the 32-bit path, None), or (None, its folded keys) where
    they do not fit: the packed path takes those keys rather than folding them again."""
    if not hasattr(local, "narrow"):
        local.narrow = narrow_keys.Buffers(size)
    n, n_items = s.shape
    keys, scratch, mask = local.narrow.shaped(n, n_items)
    lo, hi = narrow_keys.folded_keys(s, keys, scratch, _copy)
    if not narrow_keys.fits(lo, hi):
        return None, keys
    if d == 0:
        entries = narrow_keys.row_entries(rel[block], mask)
    else:  # the relevance's columns copied as S's are, in tiles (the scratch is free now)
        r = local.narrow.scratch.view(np.float32)[: n * n_items].reshape(n, n_items)
        _copy(rel.T[block], r)
        entries = narrow_keys.row_entries(r, mask)
    if not narrow_keys.packs(n, entries[1].size):  # the entries leave the keys as they are
        return None, keys
    return narrow_keys.block_stats(keys, lo, entries, threshold, local.narrow), None


class _Buffers:
    """Per-thread scratch for blocks of up to `size` items, reused across blocks (blocks
    of both directions hold about as many items, so one set serves both)."""

    def __init__(self, size: int):
        self.keys = np.empty(size, np.int64)
        self.bits = np.empty(size, np.int32)
        self.fold = np.empty(size, np.int32)
        self.mask = np.empty(size, np.bool_)

    def shaped(self, n: int, n_items: int) -> tuple[np.ndarray, ...]:
        """[n, n_items] views of keys, bits, fold and mask."""
        arrays = (self.keys, self.bits, self.fold, self.mask)
        return tuple(a[: n * n_items].reshape(n, n_items) for a in arrays)


def _block_stats(
    s: np.ndarray, r: np.ndarray, threshold: float, buf: _Buffers, folded: np.ndarray | None
) -> dict:
    """Statistics of a block by the packed sort; `folded`: its keys folded already
    (`narrow_keys.folded_keys`), or None."""
    n, n_items = s.shape
    keys, bits, fold, mask = buf.shaped(n, n_items)
    halves = keys.view(np.int32)
    high, low = halves[:, _HI::2], halves[:, _LO::2]
    # Bits of -s (0 - s: -0.0 and 0.0 both become +0.0) in ascending signed order, i.e.
    # descending similarity: c ^ ((c >> 31) & 0x7FFFFFFF) flips the magnitude of negatives.
    # Computed contiguously (strided ufuncs are not vectorised); the last step writes the
    # high halves of the keys.
    if folded is not None:
        np.copyto(high, folded)
    else:
        _copy(s, bits.view(np.float32), negate=True)
        np.right_shift(bits, 31, out=fold)
        np.bitwise_and(fold, _MAGNITUDE, out=fold)
        np.bitwise_xor(bits, fold, out=high)
    _copy(r, low.view(np.float32))  # relevance bits, -0.0 -> 0.0
    keys.sort(axis=1)
    # Tied: neighbours with equal similarity (high halves); relevant: non-zero low halves,
    # found through a boolean mask (faster than a float nonzero: docs/benchmarks.md#evaluation).
    np.equal(high[:, 1:], high[:, :-1], out=mask[:, 1:])
    tied = mask[:, 1:].any(axis=1)
    np.not_equal(low, 0, out=mask)
    flat = np.flatnonzero(mask)
    row_start = np.arange(0, n * n_items + 1, n_items)
    count = np.diff(np.searchsorted(flat, row_start))  # entries of each query
    pos = flat - np.repeat(row_start[:-1], count)
    gain = halves.ravel()[2 * flat + _LO].view(np.float32)
    stats = sparse_stats(count, pos, gain, n_items, threshold)
    stats["tied"] = tied
    return stats


def _copy(src: np.ndarray, out: np.ndarray, *, negate: bool = False) -> None:
    """out = src + 0.0, or 0.0 - src: either way -0.0 becomes +0.0. A source read through
    a transposed view (text-to-video blocks) is copied in tiles of items: whole-row copies
    would walk its columns across the cache (docs/benchmarks.md#evaluation)."""
    if src.strides[1] <= src.strides[0]:
        tiles = [np.s_[:, :]]
    else:
        tiles = [np.s_[:, start : start + _TILE] for start in range(0, src.shape[1], _TILE)]
    for tile in tiles:
        if negate:
            np.subtract(_ZERO, src[tile], out=out[tile])
        else:
            np.add(src[tile], _ZERO, out=out[tile])
