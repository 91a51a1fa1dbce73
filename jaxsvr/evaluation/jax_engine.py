"""Accelerator evaluation engine: jitted sort of row blocks, dense per-query statistics.

On a GPU or TPU the straightforward ranking is fast, so this engine sorts each block of
query rows with `lax.sort` on (-similarity, relevance) (two keys: descending similarity,
ties least relevant first, -0.0 == 0.0, the rule of `query_stats`), and reduces the ranked
relevance densely. Accumulations run in float64 (`jax.enable_x64` around the call) so the
results match the NumPy engine and the official evaluation to ~1e-12.

On CPU, XLA's sort is several times slower than NumPy's SIMD sort: `evaluate(...,
backend="auto")` only picks this engine when JAX's default backend is an accelerator.
Blocks keep device memory bounded (block rows x items x a few float64 buffers).

`stream_stats(scores, relevance)` is the streamed form (`jaxsvr.evaluation.streamed`, which
runs the NumPy engine): block sources (`jaxsvr.evaluation.blocks`) give each block's
similarity (from embeddings: a jitted float32 product at the highest precision, the item
embeddings on the device once per direction) and relevance (from class sets: the block's
IoU tables travel and the device gathers them), so neither [n_videos, n_texts] matrix is
held; with `share` a process ranks only its round-robin part of the blocks. Everything
the device gets is padded to one shape per direction on the host, so nothing compiles per
block, and the host prepares a block while the device ranks the one before. The blocks
are those of `query_stats`, so on the same similarity both give the same statistics bit
for bit. Single-instance positives (`positives=`) are ranked from the same blocks by
comparisons (`_positive_stats`, the jitted twin of `query_stats.positive_ranks`).
Timings on an H100: docs/benchmarks.md ("On a GPU").
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxsvr.errors import InputError
from jaxsvr.evaluation import blocks
from jaxsvr.evaluation.query_stats import QueryStats
from jaxsvr.runtime import process_tuning

_BLOCK_ELEMENTS = 1 << 25  # ~32M items per block: ~1.3 GB of float64 temporaries


def query_stats(
    sim, rel, *, threshold: float = 1.0, workers: int | None = None
) -> tuple[QueryStats, QueryStats]:
    """Per-query statistics, video-to-text (rows) and text-to-video (columns).

    Args:
      sim: [n_videos, n_texts] similarities (NumPy or JAX array, possibly on device).
      rel: [n_videos, n_texts] relevance in [0, 1].
      threshold: relevance of a positive for the instance metrics.
      workers: host threads of the NumPy engine; unused here (the device parallelises).
    """
    with jax.enable_x64(True):
        sim = jnp.asarray(sim, jnp.float32)
        rel = jnp.asarray(rel, jnp.float32)
        return (_direction(sim, rel, threshold), _direction(sim.T, rel.T, threshold))


def stream_stats(
    scores,
    relevance,
    *,
    threshold: float = 1.0,
    share: tuple[int, int] = (0, 1),
    positives: blocks.Positives | None = None,
) -> tuple[QueryStats, ...]:
    """Per-query statistics (v2t, t2v) of block sources (module docstring): `scores` a
    `blocks.Embeddings` or `blocks.Matrix`, `relevance` a `blocks.MatrixRelevance` or
    `blocks.BlockRelevance`; `share` = (index, count) and `positives` as in
    `streamed.stream_stats` (the other queries' statistics stay zero; with positives, two
    more statistics follow, their ranks from the same similarity blocks on the device).

    Raises:
      InputError: a block's similarity is not finite, or the relevance or positives are of
        another shape than the scores.
    """
    for name, source in (("relevance", relevance), ("positives", positives)):
        if source is not None and tuple(source.shape) != tuple(scores.shape):
            raise InputError(
                f"{scores.shape[0]} videos x {scores.shape[1]} texts scored, but {name} of "
                f"{source.shape[0]} clips x {source.shape[1]} sentences"
            )
    index, count = share
    out, single = [], []
    # the host's only BLAS work is the IoU tables' small products: OpenBLAS's other
    # threads would spin between them, burning most of the host's CPU time
    with jax.enable_x64(True), process_tuning.blas_threads(1):
        for d in (0, 1):
            n_queries, n_items = scores.shape[d], scores.shape[1 - d]
            rows = _rows(n_queries, n_items)
            similarity = _similarity_rows(scores, d, rows)
            relevant = _relevance_rows(relevance, d, rows)
            stats = [QueryStats.empty(n_queries) for _ in range(1 if positives is None else 2)]
            if positives is not None:
                positive = _positive_entries(positives, d, rows)
            pending = None  # the block in flight: the host prepares the next one meanwhile
            for job, start in enumerate(range(0, n_queries, rows)):
                if job % count != index:
                    continue
                stop = min(start + rows, n_queries)
                s = similarity(start, stop)
                parts = [_block_stats(s, relevant(start, stop), jnp.float32(threshold))]
                if positives is not None:
                    parts.append(_positive_stats(s, positive(start, stop)))
                if pending is not None:
                    _collect(stats, d, *pending)
                pending = (start, stop, _all_finite(s), parts)
            if pending is not None:
                _collect(stats, d, *pending)
            out.append(stats[0])
            single += stats[1:]
    return (*out, *single)


def _collect(stats: list, direction: int, start: int, stop: int, finite, parts) -> None:
    """Wait for a block's statistics and write them into `stats` (one per part)."""
    if not bool(finite):
        raise InputError(
            f"similarity of {('video', 'text')[direction]} queries {start}..{stop - 1} "
            "has non-finite values: scale the embeddings or fix the model output"
        )
    for into, part in zip(stats, jax.device_get(parts)):
        into.put(start, {k: v[: stop - start] for k, v in part.items()})


def _positive_entries(positives: blocks.Positives, direction: int, rows: int):
    """f(start, stop): the block's positives as flat indices query * n_items + item (int32
    when they fit), padded to one length per direction with an index past the block, which
    the device's scatter drops: only the indices travel, not a mask of the block."""
    n_queries, n_items = positives.shape[direction], positives.shape[1 - direction]
    ends = [(a, min(a + rows, n_queries)) for a in range(0, n_queries, rows)]
    length = max(max(len(positives.block(direction, a, b)[1]) for a, b in ends), 1)
    dtype = np.int32 if rows * n_items < 2**31 else np.int64

    def entries(start: int, stop: int) -> np.ndarray:
        count, items = positives.block(direction, start, stop)
        flat = np.full(length, rows * n_items, dtype)
        flat[: len(items)] = np.repeat(np.arange(len(count)) * n_items, count) + items
        return flat

    return entries


@jax.jit
def _positive_stats(s, entries):
    """n_pos, first_pos, last_pos of binary positives (`_positive_entries`) from
    comparisons, as `query_stats.positive_ranks` (no sort; -0.0 == 0.0 in them)."""
    positive = jnp.zeros(s.size, jnp.bool_).at[entries].set(True, mode="drop").reshape(s.shape)
    n_pos = jnp.sum(positive, axis=1)
    best = jnp.max(jnp.where(positive, s, -jnp.inf), axis=1, keepdims=True)
    worst = jnp.min(jnp.where(positive, s, jnp.inf), axis=1, keepdims=True)
    best_tied = jnp.sum(positive & (s == best), axis=1)
    first = 1 + jnp.sum(s >= best, axis=1) - best_tied
    last = jnp.sum(s >= worst, axis=1)
    return dict(
        n_pos=n_pos.astype(jnp.int64),
        first_pos=jnp.where(n_pos > 0, first, 0).astype(jnp.int64),
        last_pos=jnp.where(n_pos > 0, last, 0).astype(jnp.int64),
    )


def _similarity_rows(scores, direction: int, rows: int):
    """f(start, stop): the [rows, n_items] float32 similarity of queries start..stop - 1
    on the device, padded with zero rows."""
    if isinstance(scores, blocks.Embeddings):
        queries, items = (scores.video, scores.text)[:: 1 if direction == 0 else -1]
        items = jnp.asarray(items)  # on the device once
        return lambda a, b: _dot(_host_padded(queries[a:b], rows, np.float32), items)
    return lambda a, b: _host_padded(scores.rows(direction, a, b), rows, np.float32)


def _relevance_rows(relevance, direction: int, rows: int):
    """f(start, stop): the [rows, n_items] float32 relevance of queries start..stop - 1
    on the device, padded. From class sets only the block's small IoU tables travel and
    the device gathers them (the entries `BlockRelevance.block` gives, bit for bit: the
    same float32 table values, summed in the same order); a matrix's rows travel whole."""
    if isinstance(relevance, blocks.BlockRelevance):
        ids = tuple(jnp.asarray(i.astype(np.int32)) for i in relevance.item_ids(direction))

        def gathered(a, b):
            tables = relevance.tables(direction, a, b)
            return _gather(
                tuple(_host_padded(t, rows, np.float32) for t, _ in tables),
                tuple(_host_padded(i, rows, np.int32) for _, i in tables),
                ids,
            )

        return gathered
    return lambda a, b: _host_padded(relevance.block(direction, a, b), rows, np.float32)


@jax.jit
def _all_finite(x):
    return jnp.isfinite(x).all()


@jax.jit
def _gather(tables, inverses, item_ids):
    out = None
    for table, inverse, item_id in zip(tables, inverses, item_ids):
        part = table[inverse[:, None], item_id[None, :]]
        out = part if out is None else out + part
    return out


# No GEMM autotuning: on a GPU it costs more compile time than a whole large evaluation
# takes, and the product is a small part of a block (docs/benchmarks.md, "On a GPU").
@functools.partial(jax.jit, compiler_options={"xla_gpu_autotune_level": 0})
def _dot(queries, items):
    return jnp.dot(queries, items.T, precision=jax.lax.Precision.HIGHEST)


def _rows(n_queries: int, n_items: int) -> int:
    return max(1, min(n_queries, _BLOCK_ELEMENTS // max(n_items, 1)))


def _host_padded(x, rows: int, dtype) -> np.ndarray:
    """x as `dtype` with zero rows up to `rows`, padded on the host: the device gets one
    shape per direction, so nothing compiles per block (an IoU table's height varies)."""
    x = np.asarray(x, dtype)
    if x.shape[0] == rows:
        return x
    out = np.zeros((rows,) + x.shape[1:], dtype)
    out[: x.shape[0]] = x
    return out


def _padded(x, rows: int):
    """x with zero rows up to `rows`, so one compiled program serves every block."""
    if x.shape[0] == rows:
        return x
    return jnp.pad(x, ((0, rows - x.shape[0]), (0, 0)))


def _direction(sim, rel, threshold) -> QueryStats:
    n_queries, n_items = sim.shape
    rows = _rows(n_queries, n_items)
    parts = []
    for start in range(0, n_queries, rows):
        s, r = sim[start : start + rows], rel[start : start + rows]
        parts.append(_block_stats(_padded(s, rows), _padded(r, rows), jnp.float32(threshold)))
    stats = jax.device_get(parts)
    merged = {k: np.concatenate([p[k] for p in stats])[:n_queries] for k in stats[0]}
    return QueryStats(**merged)


@functools.partial(jax.jit)
def _block_stats(s, r, threshold):
    n = s.shape[1]
    neg, ranked = jax.lax.sort((-s, r), dimension=1, num_keys=2)
    ideal = -jnp.sort(-r, axis=1)
    g, gi = ranked.astype(jnp.float64), ideal.astype(jnp.float64)
    pos = jnp.arange(n)
    discount = 1.0 / jnp.log2(pos + 2.0)
    inv_rank = 1.0 / (pos + 1.0)
    n_rel = jnp.sum(ranked > 0, axis=1)
    cut = discount * (pos[None, :] < n_rel[:, None])
    one = (ranked == 1).astype(jnp.float64)
    positive = ranked >= threshold
    n_pos = jnp.sum(positive, axis=1)
    return dict(
        n_rel=n_rel.astype(jnp.int64),
        n_one=jnp.sum(ranked == 1, axis=1).astype(jnp.int64),
        n_pos=n_pos.astype(jnp.int64),
        dcg=jnp.sum(g * cut, axis=1),
        dcg_exp=jnp.sum((jnp.exp2(g) - 1.0) * cut, axis=1),
        dcg_nocut=jnp.sum(g * discount, axis=1),
        idcg=jnp.sum(gi * discount, axis=1),  # ideal gains beyond K are 0
        idcg_exp=jnp.sum((jnp.exp2(gi) - 1.0) * discount, axis=1),
        ap_graded=jnp.sum(one * jnp.cumsum(g, axis=1) * inv_rank, axis=1),
        ap_binary=jnp.sum(one * jnp.cumsum(one, axis=1) * inv_rank, axis=1),
        first_pos=jnp.where(n_pos > 0, jnp.argmax(positive, axis=1) + 1, 0).astype(jnp.int64),
        last_pos=jnp.where(n_pos > 0, n - jnp.argmax(positive[:, ::-1], axis=1), 0).astype(
            jnp.int64
        ),
        tied=jnp.any(neg[:, 1:] == neg[:, :-1], axis=1),
    )
