"""Evaluates a model's parameters on a test split: embed, score, rank (nDCG, mAP, R@K).

Videos and sentences are embedded separately in fixed-size chunks (one compiled program
per modality; the last chunk is padded), with parameters replicated and chunks split over
the mesh. Embeddings are pytrees ({name: [n, ...]}), gathered to the host.

Scores: for dot-product models (`Model.dot_product`) the similarity of video i and
sentence j is the dot product of their `action` embeddings, one matrix product on the
host. Other models (HGR) score blocks of `chunk` videos x `text_chunk` sentences with
their jitted `similarity`: the sentence embeddings go to the devices once (replicated),
each chunk of videos is embedded and stays on the devices (split over the mesh) while it
is scored against every sentence block, and only the [chunk, text_chunk] scores return.
`jaxsvr.evaluation.evaluate` ranks the [Nv, Nt] matrix against the class relevance.
"""

from __future__ import annotations

import time
from typing import Any

import flax.linen as nn
import jax
import numpy as np
from jax.experimental import multihost_utils

from jaxsvr import parallel
from jaxsvr.evaluation.metrics import evaluate


class RetrievalEvaluator:
    """Args:
    model: a `jaxsvr.models` module (embed_video / embed_text / similarity).
    video: [Nv, ...] test video features; text: field -> [Nt, ...] sentence text inputs
      (the fields the model reads are used).
    relevance: [Nv, Nt] class relevance.
    mesh: the device mesh; chunk: rows per embedding call (a multiple of the devices).
    text_chunk: sentences per similarity block (non-dot-product models).
    threshold, backend: as in `evaluate`.
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
    ):
        devices = mesh.shape["data"]
        self.chunk = max(devices, chunk // devices * devices)
        self.text_chunk = max(1, text_chunk)
        self.video, self.relevance = video, relevance
        self.text = {f: text[f] for f in model.text_fields}
        self.mesh, self.dot = mesh, model.dot_product
        self.threshold, self.backend = threshold, backend
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
        t = self._embed(self._embed_text, params, self.text)
        if not self.dot:
            return self._blocks(params, t)
        v = self._embed(self._embed_video, params, {"video": self.video})
        return v @ t.T

    def __call__(self, params: Any, *, with_similarity: bool = False) -> dict[str, Any]:
        """The test metrics (and the similarity matrix under "similarity" if asked)."""
        start = time.perf_counter()
        sim = self.similarity(params)
        metrics = evaluate(sim, self.relevance, threshold=self.threshold, backend=self.backend)
        metrics["eval_seconds"] = time.perf_counter() - start
        if with_similarity:
            metrics["similarity"] = sim
        return metrics

    def _embed(self, fn, params, arrays: dict[str, np.ndarray]):
        n = len(next(iter(arrays.values())))
        out = []
        for start in range(0, n, self.chunk):
            part = {
                k: _pad(np.asarray(v[start : start + self.chunk]), self.chunk)
                for k, v in arrays.items()
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
            part = {"video": _pad(np.asarray(self.video[v0 : v0 + self.chunk]), self.chunk)}
            video_emb = self._embed_video(params, parallel.global_batch(_local(part), self.mesh))
            rows = min(self.chunk, nv - v0)
            for t0 in range(0, nt, step):
                block = self._block(params, video_emb, text_dev, np.int32(t0))
                cols = min(step, nt - t0)
                out[v0 : v0 + rows, t0 : t0 + cols] = _to_host(block)[:rows, :cols]
        return out


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
