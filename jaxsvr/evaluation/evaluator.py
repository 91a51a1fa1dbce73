"""Evaluates a model's parameters on a test split: embed, score, rank (nDCG, mAP, R@K).

Videos and sentences are embedded separately in fixed-size chunks (one compiled program
per modality; the last chunk is padded), with parameters replicated and chunks split over
the mesh. The similarity of video i and sentence j is the dot product of their `action`
embeddings; `jaxsvr.evaluation.evaluate` ranks it against the class relevance.
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
    model: a `jaxsvr.models` module with embed_video / embed_text.
    video: [Nv, ...] test video features; tokens: field -> [Nt, L] sentence token ids.
    relevance: [Nv, Nt] class relevance.
    mesh: the device mesh; chunk: rows per embedding call (a multiple of the devices).
    threshold, backend: as in `evaluate`.
    """

    def __init__(
        self,
        model: nn.Module,
        video: np.ndarray,
        tokens: dict[str, np.ndarray],
        relevance: np.ndarray,
        mesh: jax.sharding.Mesh,
        *,
        chunk: int = 1024,
        threshold: float = 1.0,
        backend: str = "auto",
    ):
        devices = mesh.shape["data"]
        self.chunk = max(devices, chunk // devices * devices)
        self.video, self.tokens, self.relevance = video, tokens, relevance
        self.mesh = mesh
        self.threshold, self.backend = threshold, backend
        shard = parallel.batch_sharded(mesh)
        rep = parallel.replicated(mesh)

        def embed(method):
            def f(params, batch):
                return model.apply(params, batch, method=method)["action"]

            return jax.jit(f, in_shardings=(rep, shard), out_shardings=shard)

        self._embed_video = embed(model.embed_video)
        self._embed_text = embed(model.embed_text)

    def similarity(self, params: Any) -> np.ndarray:
        """[Nv, Nt] float32 test similarity."""
        v = self._embed(self._embed_video, params, {"video": self.video})
        t = self._embed(self._embed_text, params, self.tokens)
        return v @ t.T

    def __call__(self, params: Any) -> dict[str, Any]:
        start = time.perf_counter()
        sim = self.similarity(params)
        metrics = evaluate(sim, self.relevance, threshold=self.threshold, backend=self.backend)
        metrics["eval_seconds"] = time.perf_counter() - start
        return metrics

    def _embed(self, fn, params, arrays: dict[str, np.ndarray]) -> np.ndarray:
        n = len(next(iter(arrays.values())))
        out = []
        for start in range(0, n, self.chunk):
            part = {
                k: _pad(np.asarray(v[start : start + self.chunk]), self.chunk)
                for k, v in arrays.items()
            }
            emb = fn(params, parallel.global_batch(_local(part), self.mesh))
            out.append(np.asarray(multihost_utils.process_allgather(emb, tiled=True)))
        return np.concatenate(out)[:n].astype(np.float32)


def _pad(x: np.ndarray, size: int) -> np.ndarray:
    if len(x) == size:
        return x
    pad = np.zeros((size - len(x), *x.shape[1:]), x.dtype)
    return np.concatenate([x, pad])


def _local(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    cut = parallel.process_slice(len(next(iter(batch.values()))))
    return {k: v[cut] for k, v in batch.items()}
