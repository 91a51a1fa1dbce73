"""Streamed evaluation: the metrics of embeddings and class sets, block by block.

`evaluate_embeddings(video, text, terms)` gives every key of `metrics.evaluate(sim, rel)`
for sim = video @ text.T and rel = the weighted IoU of class sets (`class_terms`: the
EPIC class relevance of `jaxsvr.relevance.class_relevance`) without ever holding either
[n_videos, n_texts] matrix. For each block of queries of each direction it computes

- the block's similarity from the embeddings: a float32 product of the query rows and
  all item embeddings (one product for several blocks, up to 32 MB of similarities: BLAS
  packs all item embeddings per product, which costs more than a small product), the dot
  product the models' `similarity` computes (every jaxsvr model scores unit vectors, so
  this is their cosine score; embeddings are used as given, not normalised). OpenBLAS's
  blocked matrix product sums every dot product in the same order whatever the shapes,
  so a block is the rows of the dense `video @ text.T` (or of its transpose) bit for bit
  (tested at EK-100 size). Small products (OpenBLAS's small-matrix kernels; 20 x 300 at
  d = 256 is one) and one-row products (the matrix-vector kernel: a block of one query
  is computed as two rows) sum in another order, so there a differently shaped dense
  product may differ in the last bit;
- the block's relevance from the class sets: per term, an IoU table between the block's
  distinct query sets and the items' distinct sets (`relevance.classes.iou_table`:
  |A ∩ B| from a multi-hot product, union = |A| + |B| - |A ∩ B|, in float32), weighted
  and summed as `weighted_iou` does, so every entry equals the dense matrix's bit for bit;
- the block's per-query statistics by the NumPy engine (`numpy_engine.RowBlocks`, the
  engine's own block ranking), written into `QueryStats` of each direction.

Blocks go to threads (one block each, BLAS limited to one thread meanwhile:
`runtime.process_tuning.blas_threads`).

Only those statistics are kept, so memory is O(block x items + queries), and the
statistics reduce to the metrics by `metrics.summarize`, as in the dense path. Blocks
follow the engine's partition (`numpy_engine.block_rows`): the statistics then equal the
dense path's bit for bit (they hold running sums over a block in their last bits). A
memory budget bounds the blocks in flight (one per thread); where the engine's block does
not fit, blocks shrink down to one query (the same metrics, the last bits of a few
float64 sums aside), and where one query does not fit, `InputError` says what is needed.
Long evaluations log their progress (blocks done, elapsed, ETA) at INFO.
Cost model and figures: docs/metrics.md#streamed-evaluation, docs/benchmarks.md.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.errors import InputError
from jaxsvr.evaluation import metrics, numpy_engine
from jaxsvr.evaluation.query_stats import QueryStats
from jaxsvr.relevance.classes import iou_table
from jaxsvr.runtime import process_tuning

log = logging.getLogger(__name__)

DEFAULT_MEMORY = 1 << 30  # bytes of blocks in flight (all threads)
# Working bytes per (query, item) pair of a block: similarity and relevance (8), the
# relevance's gathers (4 per term, 2 terms), the engine's scratch (narrow keys 42, packed
# keys 17) and its sparse statistics (~40 per relevant pair; all relevant at worst, 11% at
# EK-100: an upper estimate; peak RSS in benchmarks/streamed_evaluation.py agrees).
BYTES_PER_PAIR = 8 + 8 + 42 + 17 + 40
_PRODUCT_BYTES = 32 << 20  # similarity computed per matrix product (several blocks)
Terms = Sequence[tuple[float, ClassSets, ClassSets]]  # (weight, clip sets, sentence sets)


def class_terms(
    clip_verbs: ClassSets, clip_nouns: ClassSets, sent_verbs: ClassSets, sent_nouns: ClassSets
) -> list[tuple[float, ClassSets, ClassSets]]:
    """The terms of the EPIC class relevance, 1/2 IoU(verbs) + 1/2 IoU(nouns), as
    `relevance.class_relevance` weighs them."""
    return [(0.5, clip_verbs, sent_verbs), (0.5, clip_nouns, sent_nouns)]


def evaluate_embeddings(
    video: np.ndarray,
    text: np.ndarray,
    terms: Terms,
    *,
    threshold: float = 1.0,
    bounds: bool = False,
    memory: int = DEFAULT_MEMORY,
    workers: int | None = None,
    block_queries: int | None = None,
    progress_s: float = 30.0,
) -> dict[str, float | int | None]:
    """Every key of `metrics.evaluate(video @ text.T, R)`, R = sum_k w_k IoU(a_k, b_k).

    Args:
      video: [n_videos, d] clip embeddings (float32; a memory map is read block by block).
      text: [n_texts, d] sentence embeddings.
      terms: (weight, clip sets [n_videos], sentence sets [n_texts]) per term
        (`class_terms` for the EPIC class relevance).
      threshold, bounds: as in `metrics.evaluate`.
      memory: bytes of blocks in flight (`BYTES_PER_PAIR` per query-item pair of a block,
        and each thread's similarity product of several blocks, up to 32 MB); the
        embeddings, class sets and per-query statistics come on top.
      workers: threads (a block each); default min(4, cpu count), fewer where the memory
        holds fewer blocks.
      block_queries: queries per block, at most the engine's (`numpy_engine.block_rows`);
        default the largest that `memory` allows. Only the engine's gives the dense
        path's numbers to the last bit.
      progress_s: seconds between progress lines (INFO).

    Returns:
      The metrics dict of `metrics.evaluate`.

    Raises:
      InputError: bad shapes, non-finite embeddings or similarities, a threshold outside
        (0, 1], or a memory budget too small for a block of one query.
    """
    v2t, t2v = stream_stats(
        video,
        text,
        terms,
        threshold=threshold,
        memory=memory,
        workers=workers,
        block_queries=block_queries,
        progress_s=progress_s,
    )
    return metrics.summarize(v2t, t2v, bounds=bounds)


def stream_stats(
    video: np.ndarray,
    text: np.ndarray,
    terms: Terms,
    *,
    threshold: float = 1.0,
    memory: int = DEFAULT_MEMORY,
    workers: int | None = None,
    block_queries: int | None = None,
    progress_s: float = 30.0,
) -> tuple[QueryStats, QueryStats]:
    """Per-query statistics (v2t, t2v) of `evaluate_embeddings` (same arguments)."""
    video, text = _check(video, text, terms, threshold)
    relevance = BlockRelevance(terms)
    sides = ((video, text), (text, video))  # (queries, items) of v2t, t2v
    plan = _plan(sides, memory, workers or min(4, os.cpu_count() or 1), block_queries)
    workers, rows, group = plan
    out = (QueryStats.empty(len(video)), QueryStats.empty(len(text)))
    jobs = [(d, start) for d, (q, _) in enumerate(sides) for start in range(0, len(q), group[d])]
    size = max(rows[d] * len(items) for d, (_, items) in enumerate(sides))
    local = threading.local()  # each thread's engine scratch, reused across blocks
    progress = _Progress(sum(-(-len(q) // r) for (q, _), r in zip(sides, rows)), progress_s)

    def work(job: tuple[int, int]) -> None:
        d, first = job
        queries, items = sides[d]
        last = min(first + group[d], len(queries))
        sims = block_similarity(queries[first:last], items)  # [group, n_items]
        lo, hi = float(sims.min()), float(sims.max())
        if not (np.isfinite(lo) and np.isfinite(hi)):
            name = ("video", "text")[d]
            raise InputError(
                f"similarity of {name} queries {first}..{last - 1} has non-finite values "
                "(the embeddings' products overflow float32): scale the embeddings"
            )
        if not hasattr(local, "ranker"):
            local.ranker = numpy_engine.RowBlocks(size)
        for start in range(first, last, rows[d]):
            stop = min(start + rows[d], last)
            r = relevance.block(d, start, stop)
            out[d].put(start, local.ranker(sims[start - first : stop - first], r, threshold))
            progress.done()

    if workers == 1 or len(jobs) == 1:  # BLAS may use every core for the products
        for job in jobs:
            work(job)
    else:  # blocks handed out as threads free up, as in the engine; one BLAS thread each
        with process_tuning.blas_threads(1), ThreadPoolExecutor(min(workers, len(jobs))) as pool:
            list(pool.map(work, jobs))  # re-raises errors
    return out


def block_similarity(queries: np.ndarray, items: np.ndarray) -> np.ndarray:
    """[n, n_items] float32 dot products, the rows of the dense `queries @ items.T` (the
    module docstring says when bit for bit; one query is computed as two rows: the
    matrix-vector kernel NumPy takes for one row sums in another order)."""
    q = np.asarray(queries, np.float32)
    with np.errstate(over="ignore"):  # overflow is the caller's error (non-finite values)
        if len(q) == 1:
            return np.ascontiguousarray((np.concatenate([q, q]) @ items.T)[:1])
        return q @ items.T


class BlockRelevance:
    """Blocks of R = sum_k w_k IoU(a_k[i], b_k[j]) from class sets, in either direction.

    Each side's sets are factorised once (`ClassSets.unique`); a block computes an IoU
    table between its queries' distinct sets and the items' distinct sets, then gathers
    it, so memory is O(block x items) and every entry is `weighted_iou`'s bit for bit.

    Example:
      rel = BlockRelevance(class_terms(clip_verbs, clip_nouns, sent_verbs, sent_nouns))
      r = rel.block(0, 0, 8)  # [8, n_texts]: clips 0..7 against every sentence
      r = rel.block(1, 0, 8)  # [8, n_videos]: sentences 0..7 against every clip
    """

    def __init__(self, terms: Terms):
        # per term: weight, then (distinct sets, inverse) of clips and of sentences
        self._terms = [(np.float32(w), a.unique(), b.unique()) for w, a, b in terms]

    def block(self, direction: int, start: int, stop: int) -> np.ndarray:
        """[stop - start, n_items] float32 relevance of queries start..stop - 1 of
        `direction` (0: clips against sentences, 1: sentences against clips)."""
        out = None
        for weight, *pair in self._terms:
            (query_sets, query_id), (item_sets, item_id) = pair[direction], pair[1 - direction]
            ids, inverse = np.unique(query_id[start:stop], return_inverse=True)
            table = iou_table(query_sets.take(ids), item_sets)
            if weight != 1.0:
                table *= weight
            part = np.take(table[inverse.reshape(-1)], item_id, axis=1)
            if out is None:
                out = part
            else:
                out += part
        return out


def _check(video, text, terms: Terms, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """The embeddings as float32 (memory maps stay maps), checked against the sets."""
    video, text = (np.asarray(e) for e in (video, text))
    if video.ndim != 2 or text.ndim != 2 or video.shape[1] != text.shape[1]:
        raise InputError(
            f"video embeddings {video.shape} and text embeddings {text.shape} must be "
            "[n_videos, d] and [n_texts, d] with the same width d"
        )
    if len(video) == 0 or len(text) == 0:
        raise InputError("embeddings are empty: need at least one video and one text")
    if not terms:
        raise InputError("no relevance terms: give the class sets of clips and sentences")
    for _, clip_sets, sent_sets in terms:
        if len(clip_sets) != len(video) or len(sent_sets) != len(text):
            raise InputError(
                f"{len(video)} video and {len(text)} text embeddings, but class sets of "
                f"{len(clip_sets)} clips and {len(sent_sets)} sentences: one row per "
                "clip and sentence, in the tables' order"
            )
    if not 0.0 < threshold <= 1.0:
        raise InputError(f"positive threshold must be in (0, 1], got {threshold}")
    out = []
    for name, e in (("video", video), ("text", text)):
        e = e if e.dtype == np.float32 else e.astype(np.float32)
        if not (np.isfinite(e.min()) and np.isfinite(e.max())):
            bad = np.argwhere(~np.isfinite(e))[0].tolist()
            raise InputError(f"{name} embeddings have non-finite values (first at row {bad[0]})")
        out.append(e)
    return out[0], out[1]


def _plan(sides, memory: int, workers: int, block_queries: int | None) -> tuple:
    """(threads, queries per block, queries per similarity product) of each direction
    within `memory` bytes."""
    n_queries = [len(queries) for queries, _ in sides]
    engine = [
        min(numpy_engine.block_rows(len(items)), n) for n, (_, items) in zip(n_queries, sides)
    ]
    wanted = engine
    if block_queries is not None:
        if block_queries < 1:
            raise InputError(f"block_queries must be at least 1, got {block_queries}")
        wanted = [min(r, block_queries) for r in engine]
    # Threads: as many blocks of the wanted size (the larger direction's) as fit.
    pair_bytes = [BYTES_PER_PAIR * len(items) for _, items in sides]
    block_bytes = max(r * b for r, b in zip(wanted, pair_bytes))
    workers = max(1, min(workers, memory // block_bytes))
    rows = [min(r, memory // (workers * b)) for r, b in zip(wanted, pair_bytes)]
    if min(rows) < 1:
        raise InputError(
            f"memory budget of {memory / 2**20:.3g} MB holds no block: one query against "
            f"{max(len(items) for _, items in sides)} items needs "
            f"{max(pair_bytes) / 2**20:.3g} MB ({BYTES_PER_PAIR} bytes per item); raise "
            "the budget to at least that"
        )
    if rows != engine:
        log.info(
            "streamed evaluation: blocks of %s queries (v2t, t2v) in %.3g MB, the engine's "
            "are %s: metrics may differ from the dense path in the last bits",
            rows,
            memory / 2**20,
            engine,
        )
    # One product for several blocks: BLAS packs all item embeddings once per product, which
    # for blocks of a few queries against many items costs more than the product itself.
    group = []
    for r, (_, items) in zip(rows, sides):
        block_sim = 4 * r * len(items)  # a block's own similarity, in BYTES_PER_PAIR
        spare = memory // workers - BYTES_PER_PAIR * r * len(items)
        group.append(r * max(1, min(_PRODUCT_BYTES // block_sim, 1 + spare // block_sim)))
    return workers, rows, group


class _Progress:
    """Counts finished blocks and logs progress and ETA every `every_s` seconds."""

    def __init__(self, total: int, every_s: float):
        self.total, self.every_s = total, every_s
        self.count = 0
        self.start = self.last = time.perf_counter()
        self.lock = threading.Lock()

    def done(self) -> None:
        with self.lock:
            self.count += 1
            now = time.perf_counter()
            if now - self.last < self.every_s or self.count == self.total:
                return
            self.last = now
            elapsed = now - self.start
            eta = elapsed / self.count * (self.total - self.count)
            log.info(
                "streamed evaluation: %d/%d blocks (%.0f%%), %.0f s, ETA %.0f s",
                self.count,
                self.total,
                100.0 * self.count / self.total,
                elapsed,
                eta,
            )
