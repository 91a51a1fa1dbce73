"""One process of a multi-process test evaluation (tests/test_distributed.py): an MME model
with seeded parameters scored by `RetrievalEvaluator` on random test inputs, streamed, its
metrics written as JSON by process 0.

    python tests/distributed_evaluation.py OUT.json

Joins `jax.distributed` as `jaxsvr.runtime.distributed.join` does from the launcher's
variables (`JAXSVR_COORDINATOR`, ...); without them it runs as one process. The inputs
have tied similarities (embeddings of repeated clips and sentences) and single-instance
positives, so every key (ranks, ties, `class_*`) is compared.
"""

from __future__ import annotations

import json
import sys

from jaxsvr.runtime import distributed


def seeded_evaluator(backend: str = "numpy", nv: int = 90, nt: int = 70):
    """(params, evaluator): an MME model with seeded parameters and its streamed
    `RetrievalEvaluator` on random inputs with tied similarities (repeated clips and
    sentences), graded relevance (threshold 0.5) and single-instance positives."""
    import jax
    import numpy as np

    from jaxsvr.evaluation.evaluator import RetrievalEvaluator
    from jaxsvr.models import mme
    from jaxsvr.runtime import parallel

    rng = np.random.default_rng(0)
    video = rng.normal(size=(nv, 3, 16)).astype(np.float32)
    video[::7] = video[0]  # tied similarities: repeated clips and sentences
    caption = rng.integers(1, 40, (nt, 5)).astype(np.int32)
    caption[::5] = caption[0]
    rel = np.round(rng.uniform(size=(nv, nt)) * 4).astype(np.float32) / 4
    instance = (rng.uniform(size=(nv, nt)) < 0.03).astype(np.float32)
    model = mme.Model(vocab_size=40, video_dim=16, embed_dim=8, word_dim=6)
    params = model.init(jax.random.key(0), {"video": video[:2], "caption": caption[:2]})
    evaluator = RetrievalEvaluator(
        model,
        video,
        {"caption": caption},
        rel,
        parallel.make_mesh(),
        chunk=16,
        threshold=0.5,
        backend=backend,
        instance=instance,
    )
    return params, evaluator


def main(out: str) -> None:
    distributed.join("auto")
    import jax

    params, evaluator = seeded_evaluator()
    metrics = evaluator(params)
    metrics.pop("eval_seconds")
    if jax.process_index() == 0:
        with open(out, "w") as f:
            json.dump({"processes": jax.process_count(), "metrics": metrics}, f)


if __name__ == "__main__":
    main(sys.argv[1])
