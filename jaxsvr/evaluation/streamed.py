"""Streamed evaluation: the metrics of embeddings and class sets, block by block.

`evaluate_embeddings(video, text, terms)` gives every key of `metrics.evaluate(sim, rel)`
for sim = video @ text.T and rel = the weighted IoU of class sets (`class_terms`: the
EPIC class relevance of `jaxsvr.relevance.class_relevance`) without ever holding either
[n_videos, n_texts] matrix. `stream_stats(scores, relevance)` does the work for any block
sources (`jaxsvr.evaluation.blocks`: similarity from embeddings or a matrix, relevance
from class sets or a matrix). For each block of queries of each direction it takes the
block's similarity rows (one product for several blocks, up to 32 MB of similarities:
BLAS packs all item embeddings per product, which costs more than a small product) and
relevance rows, and the NumPy engine's per-query statistics of the block
(`numpy_engine.RowBlocks`, the engine's own block ranking), written into `QueryStats` of
each direction; with single-instance positives (`blocks.Positives`) also their ranks from
the same similarity blocks. Blocks go to threads (one block each, BLAS limited to one thread
meanwhile: `runtime.process_tuning.blas_threads`); with `share` a process computes only
its round-robin part of the blocks (the trainer's evaluator sums the parts over
processes).

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
from typing import Any

import numpy as np

from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.errors import InputError
from jaxsvr.evaluation import metrics, numpy_engine
from jaxsvr.evaluation.blocks import BlockRelevance, Embeddings, Positives, Terms
from jaxsvr.evaluation.query_stats import QueryStats, positive_ranks
from jaxsvr.runtime import process_tuning

log = logging.getLogger(__name__)

DEFAULT_MEMORY = 1 << 30  # bytes of blocks in flight (all threads)
# Working bytes per (query, item) pair of a block: similarity and relevance (8), the
# relevance's gathers (4 per term, 2 terms), the engine's scratch (narrow keys 42, packed
# keys 17) and its sparse statistics (~40 per relevant pair; all relevant at worst, 11% at
# EK-100: an upper estimate; peak RSS in benchmarks/streamed_evaluation.py agrees).
BYTES_PER_PAIR = 8 + 8 + 42 + 17 + 40
_PRODUCT_BYTES = 32 << 20  # similarity computed per matrix product (several blocks)
Relevance = Any  # `BlockRelevance`, `MatrixRelevance`: `shape` and `block(direction, start, stop)`
Scores = Any  # `Embeddings`, `Matrix`: `shape` and `rows(direction, first, last)`


def class_terms(
    clip_verbs: ClassSets, clip_nouns: ClassSets, sent_verbs: ClassSets, sent_nouns: ClassSets
) -> list[tuple[float, ClassSets, ClassSets]]:
    """The terms of the EPIC class relevance, 1/2 IoU(verbs) + 1/2 IoU(nouns), as
    `relevance.class_relevance` weighs them."""
    return [(0.5, clip_verbs, sent_verbs), (0.5, clip_nouns, sent_nouns)]


def evaluate_embeddings(
    video: np.ndarray,
    text: np.ndarray,
    terms: Terms | Relevance,
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
        (`class_terms` for the EPIC class relevance), or any relevance source: an object
        with `shape` (n_videos, n_texts) and `block(direction, start, stop)`, as
        `BlockRelevance` and `MatrixRelevance`.
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
    relevance = terms if hasattr(terms, "block") else BlockRelevance(terms)
    v2t, t2v = stream_stats(
        Embeddings(video, text),
        relevance,
        threshold=threshold,
        memory=memory,
        workers=workers,
        block_queries=block_queries,
        progress_s=progress_s,
    )
    return metrics.summarize(v2t, t2v, bounds=bounds)


def stream_stats(
    scores: Scores,
    relevance: Relevance,
    *,
    threshold: float = 1.0,
    memory: int = DEFAULT_MEMORY,
    workers: int | None = None,
    block_queries: int | None = None,
    progress_s: float = 30.0,
    share: tuple[int, int] = (0, 1),
    positives: Positives | None = None,
) -> tuple[QueryStats, ...]:
    """Per-query statistics (v2t, t2v) of `scores` (`Embeddings` or `Matrix`) against
    `relevance` (`BlockRelevance` or `MatrixRelevance`); other arguments as in
    `evaluate_embeddings`.

    With `positives` (`blocks.Positives`: single-instance positives) two more statistics
    follow, (v2t, t2v) of those positives: n_pos, first_pos and last_pos as a ranking
    with them as relevance would give (`query_stats.positive_ranks`, from the same
    similarity blocks, without ranking again); their other fields stay zero.

    `share` = (index, count) computes only the blocks of one of `count` processes: jobs (a
    similarity product of one or more blocks) are dealt round-robin, and the other
    queries' statistics stay zero, so the sum over all shares is the whole (the trainer's
    evaluator all-reduces them: `jaxsvr.evaluation.evaluator`). The jobs do not depend on
    `count`, so any number of processes gives the same statistics bit for bit.
    """
    if tuple(relevance.shape) != tuple(scores.shape):
        raise InputError(
            f"{scores.shape[0]} videos x {scores.shape[1]} texts scored, but relevance of "
            f"{relevance.shape[0]} clips x {relevance.shape[1]} sentences: one row per clip "
            "and sentence, in the tables' order"
        )
    if positives is not None and tuple(positives.shape) != tuple(scores.shape):
        raise InputError(
            f"{scores.shape[0]} videos x {scores.shape[1]} texts scored, but positives of "
            f"{positives.shape[0]} clips x {positives.shape[1]} sentences"
        )
    if not 0.0 < threshold <= 1.0:
        raise InputError(f"positive threshold must be in (0, 1], got {threshold}")
    index, count = share
    if not 0 <= index < count:
        raise ValueError(f"share {share}: need 0 <= index < count")
    n_queries = scores.shape
    n_items = scores.shape[::-1]
    plan = _plan(n_queries, n_items, memory, workers or min(4, os.cpu_count() or 1), block_queries)
    workers, rows, group = plan
    out = (QueryStats.empty(n_queries[0]), QueryStats.empty(n_queries[1]))
    if positives is not None:  # the positives' statistics of each direction
        out += (QueryStats.empty(n_queries[0]), QueryStats.empty(n_queries[1]))
    jobs = [(d, start) for d in (0, 1) for start in range(0, n_queries[d], group[d])]
    jobs = jobs[index::count]
    size = max(rows[d] * n_items[d] for d in (0, 1))
    local = threading.local()  # each thread's engine scratch, reused across blocks
    blocks = sum(-(-(min(s + group[d], n_queries[d]) - s) // rows[d]) for d, s in jobs)
    progress = _Progress(blocks, progress_s)

    def work(job: tuple[int, int]) -> None:
        d, first = job
        last = min(first + group[d], n_queries[d])
        sims = scores.rows(d, first, last)  # [last - first, n_items]
        lo, hi = float(sims.min()), float(sims.max())
        if not (np.isfinite(lo) and np.isfinite(hi)):
            name = ("video", "text")[d]
            raise InputError(
                f"similarity of {name} queries {first}..{last - 1} has non-finite values "
                "(the embeddings' products overflow float32, or the model's scores are not "
                "finite): scale the embeddings"
            )
        if not hasattr(local, "ranker"):
            local.ranker = numpy_engine.RowBlocks(size)
        for start in range(first, last, rows[d]):
            stop = min(start + rows[d], last)
            r = relevance.block(d, start, stop)
            sim = sims[start - first : stop - first]
            out[d].put(start, local.ranker(sim, r, threshold))
            if positives is not None:
                out[2 + d].put(start, positive_ranks(sim, *positives.block(d, start, stop)))
            progress.done()

    if workers == 1 or len(jobs) <= 1:  # BLAS may use every core for the products
        for job in jobs:
            work(job)
    else:  # blocks handed out as threads free up, as in the engine; one BLAS thread each
        with process_tuning.blas_threads(1), ThreadPoolExecutor(min(workers, len(jobs))) as pool:
            list(pool.map(work, jobs))  # re-raises errors
    return out


def _plan(
    n_queries: Sequence[int], n_items: Sequence[int], memory: int, workers: int, block_queries
) -> tuple:
    """(threads, queries per block, queries per similarity product) of each direction
    within `memory` bytes."""
    engine = [min(numpy_engine.block_rows(m), n) for n, m in zip(n_queries, n_items)]
    wanted = engine
    if block_queries is not None:
        if block_queries < 1:
            raise InputError(f"block_queries must be at least 1, got {block_queries}")
        wanted = [min(r, block_queries) for r in engine]
    # Threads: as many blocks of the wanted size (the larger direction's) as fit.
    pair_bytes = [BYTES_PER_PAIR * m for m in n_items]
    block_bytes = max(r * b for r, b in zip(wanted, pair_bytes))
    workers = max(1, min(workers, memory // block_bytes))
    rows = [min(r, memory // (workers * b)) for r, b in zip(wanted, pair_bytes)]
    if min(rows) < 1:
        raise InputError(
            f"memory budget of {memory / 2**20:.3g} MB holds no block: one query against "
            f"{max(n_items)} items needs {max(pair_bytes) / 2**20:.3g} MB "
            f"({BYTES_PER_PAIR} bytes per item); raise the budget to at least that"
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
    for r, m in zip(rows, n_items):
        block_sim = 4 * r * m  # a block's own similarity, in BYTES_PER_PAIR
        spare = memory // workers - BYTES_PER_PAIR * r * m
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
