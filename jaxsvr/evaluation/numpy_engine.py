"""CPU evaluation engine: one packed 64-bit sort per query row, then sparse statistics.

The public EPIC-KITCHENS-100 evaluation argsorts every row and fancy-indexes whole
matrices (13-28 s and 2.5 GB at the 9668 x 3842 test size on our 2-core CPUs). Here, per
block of query rows:

1. Each similarity becomes the high 32 bits of an int64 key whose signed order is
   *descending* similarity (float bits with the sign folded in; -0.0 is first mapped to
   0.0), and the relevance's float bits (monotone for r >= 0) fill the low 32 bits. Both
   halves are written into the key buffer through strided views (no widening pass); the
   sign folding runs on a contiguous int32 copy first (strided ufuncs are not vectorised).
2. One `np.sort` of those int64 per row (SIMD sort) yields the ranking with the shared tie
   rule (equal similarity: less relevant first), and the ranked relevance is the low half:
   no argsort, no gather, no search.
3. Only items with r > 0 enter any metric (about 11% at EK-100), so the ranked block is
   reduced to its non-zero entries (a boolean nonzero, 4x faster than float nonzero) and
   `query_stats.sparse_stats` computes DCG, AP and first positives from them.

Why not sort float32 similarities (half the bytes) and place the relevant items with
`searchsorted`? Measured (`benchmarks/evaluation_speed.py`, the ranking step alone,
video-to-text, one thread; docs/benchmarks.md): 0.55 s against 0.67 s for the packed sort
with NumPy's AVX2 code, 0.95 against 1.19 s with its AVX-512 code on Zen 4. But that
yields positions, not ranked relevance: the gains must then be gathered in rank order,
ties among relevant items fixed up, and text-to-video blocks need a transposed relevance
copy, while the statistics and copies (half the time) stay as they are: at most ~10% of
the whole evaluation, with a second tie rule to keep exact. Not done (yet).

Blocks are sized to ~4 MB of keys (cache-sized; fresh large buffers cost page faults on
small VMs) and handed to a few threads as they free up: NumPy's sort and ufuncs release the
GIL. Blocks of both directions share one pool; text-to-video blocks are columns of S and R
read through transposed views in tiles of 512 items (3x faster than whole transposed rows),
so no full transposed copy is made. Per-query sums use `np.add.reduceat` over each query's
entries (15x faster than a weighted `np.bincount`).
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from jaxsvr.evaluation.query_stats import QueryStats, sparse_stats

_BLOCK_BYTES = 4 << 20
_TILE = 512  # items per tile when a block is read through a transposed view
_LO, _HI = (0, 1) if sys.byteorder == "little" else (1, 0)  # int32 halves of an int64
_SIGN = np.int32(-(2**31))


def query_stats(
    sim: np.ndarray, rel: np.ndarray, *, threshold: float = 1.0, workers: int | None = None
) -> tuple[QueryStats, QueryStats]:
    """Per-query statistics for video-to-text (rows) and text-to-video (columns).

    Args:
      sim: [n_videos, n_texts] float32 similarities, finite.
      rel: [n_videos, n_texts] float32 relevance in [0, 1].
      threshold: relevance of a positive for the instance metrics.
      workers: threads; default min(4, cpu count).

    Returns:
      (v2t, t2v) statistics with n_videos and n_texts queries.
    """
    sim = np.asarray(sim, np.float32)
    rel = np.asarray(rel, np.float32)
    workers = workers or min(4, os.cpu_count() or 1)
    out = (QueryStats.empty(sim.shape[0]), QueryStats.empty(sim.shape[1]))
    jobs = []  # (direction, first query)
    rows = []  # block rows of each direction
    for d, (n_queries, n_items) in enumerate((sim.shape, sim.shape[::-1])):
        rows.append(max(8, _BLOCK_BYTES // (8 * max(n_items, 1))))
        jobs += [(d, start) for start in range(0, n_queries, rows[d])]
    local = threading.local()  # per-thread scratch of each direction, reused across blocks

    def work(job: tuple[int, int]) -> None:
        d, start = job
        s, r = (sim, rel) if d == 0 else (sim.T, rel.T)
        buffers = local.__dict__.setdefault("buffers", {})
        buf = buffers.get(d) or buffers.setdefault(d, _Buffers(rows[d], s.shape[1]))
        block = np.s_[start : start + rows[d]]
        out[d].put(start, _block_stats(s[block], r[block], threshold, buf))

    if workers == 1 or len(jobs) == 1:
        for job in jobs:
            work(job)
    else:  # blocks are handed out as threads free up (text-to-video ones cost more)
        with ThreadPoolExecutor(min(workers, len(jobs))) as pool:
            list(pool.map(work, jobs))  # re-raises errors
    return out


class _Buffers:
    """Per-thread scratch of one direction, reused across blocks."""

    def __init__(self, rows: int, n_items: int):
        self.keys = np.empty((rows, n_items), np.int64)
        self.bits = np.empty((rows, n_items), np.int32)
        self.fold = np.empty((rows, n_items), np.int32)
        self.wide = np.empty((rows, n_items), np.int64)
        self.mask = np.empty((rows, n_items), np.bool_)


def _block_stats(s: np.ndarray, r: np.ndarray, threshold: float, buf: _Buffers) -> dict:
    n, n_items = s.shape
    keys, bits, fold = buf.keys[:n], buf.bits[:n], buf.fold[:n]
    wide, mask = buf.wide[:n], buf.mask[:n]
    halves = keys.view(np.int32)
    # Similarity bits (-0.0 -> 0.0 by adding +0.0) in descending signed order:
    # bits ^ (x >= 0 ? 0xFFFFFFFF : 0x80000000), the mask being (~bits >> 31) | INT_MIN;
    # computed contiguously, then written to the high halves of the keys.
    _copy(s, bits.view(np.float32))
    np.invert(bits, out=fold)
    np.right_shift(fold, 31, out=fold)
    np.bitwise_or(fold, _SIGN, out=fold)
    np.bitwise_xor(bits, fold, out=bits)
    halves[:, _HI::2] = bits
    _copy(r, halves[:, _LO::2].view(np.float32))  # relevance bits, -0.0 -> 0.0
    keys.sort(axis=1)
    # Tied: neighbours whose keys differ in the low (relevance) half only.
    np.bitwise_xor(keys[:, 1:], keys[:, :-1], out=wide[:, 1:])
    tied = np.any(wide[:, 1:].view(np.uint64) < np.uint64(1 << 32), axis=1)
    np.left_shift(keys, 32, out=wide)  # the relevance half alone: r > 0 where non-zero
    np.not_equal(wide, 0, out=mask)
    flat = np.flatnonzero(mask)
    row, pos = np.divmod(flat, n_items)
    gain = halves.ravel()[2 * flat + _LO].view(np.float32)
    stats = sparse_stats(row, pos, gain, n, n_items, threshold)
    stats["tied"] = tied
    return stats


def _copy(src: np.ndarray, out: np.ndarray) -> None:
    """out = src + 0.0 (so -0.0 becomes 0.0). A source read through a transposed view
    (text-to-video blocks) is copied in tiles of items: whole-row copies would walk its
    columns across the cache (3x slower at EK-100)."""
    if src.strides[1] <= src.strides[0]:
        np.add(src, np.float32(0.0), out=out)
        return
    for start in range(0, src.shape[1], _TILE):
        tile = np.s_[:, start : start + _TILE]
        np.add(src[tile], np.float32(0.0), out=out[tile])
