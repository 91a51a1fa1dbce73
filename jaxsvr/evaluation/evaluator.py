"""Evaluates a model's parameters on a test split: embed, score, rank (nDCG, mAP, R@K).

Videos and sentences are embedded separately in fixed-size chunks (one compiled program
per modality; the last chunk is padded), with parameters replicated and chunks split over
the mesh. Embeddings are pytrees ({name: [n, ...]}), gathered to the host.

Scores: for dot-product models (`Model.dot_product`) the similarity of video i and
sentence j is the dot product of their `action` embeddings. Other models (HGR) score
blocks of `chunk` videos x `text_chunk` sentences with their jitted `similarity`: the
sentence embeddings go to the devices once (replicated), each chunk of videos is embedded
and stays on the devices (split over the mesh) while it is scored against every sentence
block, and only the [chunk, text_chunk] scores return.

Metrics are streamed (`jaxsvr.evaluation.streamed`): each block of queries of each
direction takes its similarity rows from the embeddings (dot-product models: the [Nv, Nt]
matrix is never formed) or from the blocks' matrix (other models), and its relevance
rows from the split's matrix, and only per-query statistics are kept. The NumPy engine
ranks the blocks on CPU (`backend` "numpy", or "auto" without an accelerator), the jitted
JAX engine on accelerators (`jax_engine.stream_stats`: each block's product on the
device). With N processes each ranks its round-robin share of the blocks, the statistics
are summed over processes (each query's come from one process, the others' are zeros,
so the sum is exact) and every process reduces them to the same metrics, equal bit for
bit to one process's.

Context models (ConTra) see each test clip in its window: `video_windows` [Nv, W] rows are
gathered per chunk from the feature store (the sentences come already windowed). With an
`instance` relevance (single-instance retrieval: the clips narrated with the sentence), the
recall metrics (R@K, ranks, RSum) count those as positives, and the class-threshold ones
are kept as `class_*`; nDCG and mAP always use the class relevance. Both engines find
the positives' ranks from the class pass's similarity blocks (`blocks.Positives`,
`query_stats.positive_ranks` and its jitted twin: comparisons with the best and worst
positive's score, no second ranking).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any

import flax.linen as nn
import jax
import numpy as np
from jax.experimental import multihost_utils

from jaxsvr.evaluation import blocks, jax_engine
from jaxsvr.evaluation.metrics import choose_backend, summarize, undefined_metrics
from jaxsvr.evaluation.query_stats import QueryStats
from jaxsvr.evaluation.streamed import stream_stats
from jaxsvr.runtime import parallel

# config.eval.positives of R@K and ranks: items with R >= threshold ("class"), or the clips
# narrated with the sentence ("narration": the `instance` relevance, single-instance retrieval)
POSITIVES = ("class", "narration")
# metrics that depend on which items are positives (not nDCG / mAP)
RECALL_KEYS = ("r1_", "r5_", "r10_", "medr_", "meanr_", "geomean_", "rsum", "excluded_recall_")
MAP_KEYS = ("map_", "excluded_map_")  # left out with report_map=False


class RetrievalEvaluator:
    """Args:
    model: a `jaxsvr.models` module (embed_video / embed_text / similarity).
    video: [Nv, ...] test video features; text: field -> [Nt, ...] sentence text inputs
      (the fields the model reads are used).
    relevance: [Nv, Nt] class relevance.
    mesh: the device mesh; chunk: rows per embedding call (a multiple of the devices).
    text_chunk: sentences per similarity block (non-dot-product models).
    threshold, backend: as in `evaluate`.
    video_windows: [Nv, W] rows of each test clip's context window, for context models.
    instance: [Nv, Nt] binary positives for the recall metrics (else R >= threshold).
    report_map: False leaves the mAP keys (`map*`) out of the metrics.
    """

    def __init__(
        self,
        model: nn.Module,
        video: np.ndarray,
        text: dict[str, np.ndarray],
        relevance: np.ndarray,
        mesh: jax.sharding.Mesh,
        *,
        chunk: int = 1024,
        text_chunk: int = 512,
        threshold: float = 1.0,
        backend: str = "auto",
        video_windows: np.ndarray | None = None,
        instance: np.ndarray | None = None,
        report_map: bool = True,
    ):
        devices = mesh.shape["data"]
        self.chunk = max(devices, chunk // devices * devices)
        self.text_chunk = max(1, text_chunk)
        self.video, self.relevance = video, relevance
        self.video_windows, self.instance = video_windows, instance
        self.text = {f: text[f] for f in model.text_fields}
        self.mesh, self.dot = mesh, model.dot_product
        self.threshold, self.backend = threshold, backend
        self.report_map = report_map
        shard = parallel.batch_sharded(mesh)
        rep = parallel.replicated(mesh)

        def embed(method):
            def f(params, batch):
                out = model.apply(params, batch, method=method)
                return out["action"] if self.dot else out

            return jax.jit(f, in_shardings=(rep, shard), out_shardings=shard)

        self._embed_video = embed(model.embed_video)
        self._embed_text = embed(model.embed_text)

        def block(params, video, text, start):
            size = self.text_chunk
            part = jax.tree.map(lambda x: jax.lax.dynamic_slice_in_dim(x, start, size), text)
            return model.apply(params, video, part, method=model.similarity)["action"]

        self._block = jax.jit(block, in_shardings=(rep, shard, rep, rep), out_shardings=shard)

    def similarity(self, params: Any) -> np.ndarray:
        """[Nv, Nt] float32 test similarity."""
        t = self.text_embeddings(params)
        if not self.dot:
            return self._blocks(params, t)
        return self.video_embeddings(params) @ t.T

    def video_embeddings(self, params: Any) -> Any:
        """The test clips' embeddings on the host: [Nv, d] `action` vectors for dot-product
        models, else the model's whole {name: [Nv, ...]} embedding (`jaxsvr.runs.gallery`)."""
        return self._embed(self._embed_video, params, {"video": self.video}, self.video_windows)

    def text_embeddings(self, params: Any) -> Any:
        """The test sentences' embeddings on the host, as `video_embeddings`."""
        return self._embed(self._embed_text, params, self.text)

    def __call__(self, params: Any, *, with_similarity: bool = False) -> dict[str, Any]:
        """The test metrics (and the similarity matrix under "similarity" if asked).

        Every process embeds its share and ranks its share of the query blocks; every
        process ends with the same metrics (they all decide together whether a checkpoint
        is the best; module docstring)."""
        start = time.perf_counter()
        scores = self._scores(params)
        metrics = self._streamed_metrics(scores)
        if with_similarity:
            dense = isinstance(scores, blocks.Matrix)
            metrics["similarity"] = scores.sim if dense else scores.video @ scores.text.T
        metrics["eval_seconds"] = time.perf_counter() - start
        return metrics

    @functools.cached_property
    def undefined(self) -> dict[str, str]:
        """The metrics this evaluator reports as None whatever the parameters, key -> why
        (`jaxsvr.evaluation.metrics.undefined_metrics`, with the keys `__call__` reports)."""
        out = undefined_metrics(self.relevance, self.threshold)
        if self.instance is not None:  # as _combine: recall keys from the instance positives
            single = undefined_metrics(self.instance)
            recall = {k: v for k, v in out.items() if k.startswith(RECALL_KEYS)}
            out = {k: v for k, v in out.items() if k not in recall}
            out.update({f"class_{k}": v for k, v in recall.items()})
            out.update({k: v for k, v in single.items() if k.startswith(RECALL_KEYS)})
        if not self.report_map:
            out = {k: v for k, v in out.items() if not k.startswith(MAP_KEYS)}
        return out

    def _streamed_metrics(self, scores) -> dict[str, Any]:
        """The metrics of `scores` (`blocks.Embeddings` or `blocks.Matrix`), streamed, this
        process's share of the blocks computed here and the statistics summed over
        processes."""
        share = (jax.process_index(), jax.process_count())
        engine = (
            stream_stats if choose_backend(self.backend) == "numpy" else jax_engine.stream_stats
        )

        def reduced(relevance: np.ndarray, threshold: float, **kw) -> list[dict[str, Any]]:
            parts = [
                sum_over_processes(p)
                for p in engine(
                    scores,
                    blocks.MatrixRelevance(relevance),
                    threshold=threshold,
                    share=share,
                    **kw,
                )
            ]
            return [summarize(*parts[i : i + 2]) for i in range(0, len(parts), 2)]

        if self.instance is None:
            return self._combine(reduced(self.relevance, self.threshold)[0], None)
        # the single-instance positives' ranks from the same similarity blocks
        metrics, single = reduced(self.relevance, self.threshold, positives=self._positives)
        return self._combine(metrics, single)

    @functools.cached_property
    def _positives(self) -> blocks.Positives:
        return blocks.Positives(self.instance)

    def _combine(self, metrics: dict[str, Any], single: dict[str, Any] | None) -> dict:
        """The class-relevance metrics, with the recall keys of the single-instance
        positives (`single`; the class ones kept as `class_*`) and the mAP keys dropped
        unless reported."""
        if single is not None:
            for key in [k for k in metrics if k.startswith(RECALL_KEYS)]:
                metrics[f"class_{key}"], metrics[key] = metrics[key], single[key]
        if not self.report_map:
            metrics = {k: v for k, v in metrics.items() if not k.startswith(MAP_KEYS)}
        return metrics

    def _scores(self, params: Any):
        """The similarity's block source: the embeddings (dot-product models) or the
        matrix the model's blocks score."""
        t = self.text_embeddings(params)
        if not self.dot:
            return blocks.Matrix(self._blocks(params, t))
        return blocks.Embeddings(self.video_embeddings(params), t)

    def _embed(self, fn, params, arrays: dict[str, np.ndarray], windows=None):
        n = len(next(iter(arrays.values())))
        out = []
        for start in range(0, n, self.chunk):
            part = {
                k: _pad(_rows(v, start, self.chunk, windows), self.chunk) for k, v in arrays.items()
            }
            emb = fn(params, parallel.global_batch(_local(part), self.mesh))
            out.append(jax.tree.map(_to_host, emb))
        return jax.tree.map(lambda *parts: np.concatenate(parts)[:n], *out)

    def _blocks(self, params, text) -> np.ndarray:
        nv, nt = len(self.video), len(jax.tree.leaves(text)[0])
        step = self.text_chunk
        padded = jax.tree.map(lambda x: _pad(x, -(-nt // step) * step), text)
        text_dev = jax.device_put(padded, parallel.replicated(self.mesh))
        out = np.empty((nv, nt), np.float32)
        for v0 in range(0, nv, self.chunk):
            rows_v = _rows(self.video, v0, self.chunk, self.video_windows)
            part = {"video": _pad(rows_v, self.chunk)}
            video_emb = self._embed_video(params, parallel.global_batch(_local(part), self.mesh))
            rows = min(self.chunk, nv - v0)
            for t0 in range(0, nt, step):
                block = self._block(params, video_emb, text_dev, np.int32(t0))
                cols = min(step, nt - t0)
                out[v0 : v0 + rows, t0 : t0 + cols] = _to_host(block)[:rows, :cols]
        return out


def sum_over_processes(stats: QueryStats) -> QueryStats:
    """`stats` summed over processes (booleans: any), field by field; one process: as is.

    Sent as bytes (JAX without x64 would narrow the float64 and int64 fields)."""
    if jax.process_count() == 1:
        return stats
    fields = [f.name for f in dataclasses.fields(QueryStats)]
    arrays = [np.ascontiguousarray(getattr(stats, f)) for f in fields]
    payload = np.concatenate([a.view(np.uint8).reshape(-1) for a in arrays])
    gathered = np.asarray(multihost_utils.process_allgather(payload))  # [processes, bytes]
    out, offset = {}, 0
    for name, a in zip(fields, arrays):
        parts = gathered[:, offset : offset + a.nbytes].copy().view(a.dtype)
        offset += a.nbytes
        out[name] = parts.any(axis=0) if a.dtype == bool else parts.sum(axis=0, dtype=a.dtype)
    return QueryStats(**out)


def _rows(x: np.ndarray, start: int, size: int, windows: np.ndarray | None) -> np.ndarray:
    """Rows start .. start + size of x, or their context windows ([size, W, ...])."""
    if windows is None:
        return np.asarray(x[start : start + size])
    return np.asarray(x[windows[start : start + size]])


def _to_host(x: jax.Array) -> np.ndarray:
    return np.asarray(multihost_utils.process_allgather(x, tiled=True)).astype(
        np.float32 if np.issubdtype(x.dtype, np.floating) else x.dtype
    )


def _pad(x: np.ndarray, size: int) -> np.ndarray:
    if len(x) == size:
        return x
    pad = np.zeros((size - len(x), *x.shape[1:]), x.dtype)
    return np.concatenate([x, pad])


def _local(batch: dict) -> dict:
    cut = parallel.process_slice(len(jax.tree.leaves(batch)[0]))
    return jax.tree.map(lambda v: v[cut], batch)
