"""The evaluation demo: relevance + every metric on reference similarity matrices.

It runs the evaluation stack end to end on the built-in synthetic kitchen annotations (no
downloads) or on the EPIC-KITCHENS-100 test annotations (`config.data.annotations`):

1. clips and sentences with their verb/noun classes; class relevance R [clips, sentences];
2. reference similarity matrices that bracket what a model can reach: `random`
   (S ~ N(0, 1), the chance level: nDCG about 0.11 on the EK-100 test set), `oracle_*`
   (S = R + sigma * N(0, 1), a model that knows the classes up to noise sigma) and `perfect`
   (S = R: every metric is 1, because ties between equally relevant items cost nothing);
3. every metric of `jaxsvr.evaluation` for each, logged as a table and written to
   `WORKDIR/metrics.json` (one object per reference), with `WORKDIR/config.json`.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import ml_collections
import numpy as np

from jaxsvr.annotations import epic100, kitchen
from jaxsvr.evaluation import evaluate
from jaxsvr.files import json_text
from jaxsvr.relevance import class_relevance
from jaxsvr.runtime.workdir import write_text


def run(config: ml_collections.ConfigDict, workdir: str) -> dict[str, dict]:
    """Runs the demo and returns {reference name: metrics}."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.json").write_text(config.to_json_best_effort(indent=1) + "\n")
    clips, sentences = _load(config.data)
    start = time.perf_counter()
    rel = class_relevance(
        clips.verb_classes, clips.noun_classes, sentences.verb_classes, sentences.noun_classes
    )
    logging.info(
        "relevance %d x %d: mean %.5f, %.6f of entries = 1 (%.2fs)",
        *rel.shape,
        rel.mean(dtype=np.float64),
        (rel == 1).mean(),
        time.perf_counter() - start,
    )
    rng = np.random.default_rng(config.seed)
    references = {"random": lambda: rng.standard_normal(rel.shape, np.float32)}
    for sigma in config.eval.oracle_noise:
        references[f"oracle_{sigma:g}"] = lambda s=sigma: (
            rel + s * rng.standard_normal(rel.shape, np.float32)
        )
    references["perfect"] = lambda: rel
    results = {}
    logging.info(
        "%-12s %8s %8s %8s %8s %8s %7s",
        "similarity",
        "nDCG",
        "mAP",
        "nDCGexp",
        "mAPbin",
        "RSum",
        "secs",
    )
    for name, make in references.items():
        sim = make()
        start = time.perf_counter()
        m = evaluate(sim, rel, threshold=config.eval.threshold, backend=config.eval.backend)
        m["seconds"] = time.perf_counter() - start
        results[name] = m
        logging.info(
            "%-12s %8.4f %8.4f %8.4f %8.4f %8.1f %7.2f",
            name,
            m["ndcg_avg"],
            m["map_avg"],
            m["ndcg_exp_avg"],
            m["map_binary_avg"],
            m["rsum"],
            m["seconds"],
        )
    path = workdir / "metrics.json"
    write_text(path, json_text.dumps(results, indent=1) + "\n")
    logging.info("wrote %s", path)
    return results


def _load(data: ml_collections.ConfigDict):
    if data.annotations:
        root = Path(data.annotations)
        logging.info("data: EPIC-KITCHENS-100 test annotations from %s", root)
        clips = epic100.read_clips(root / epic100.TEST_CLIPS)
        sentences = epic100.read_sentences(root / epic100.TEST_SENTENCES, clips)
    else:
        logging.info(
            "data: built-in synthetic kitchen annotations (%d videos x %d clips, seed "
            "%d); nothing is downloaded",
            data.num_videos,
            data.clips_per_video,
            data.seed,
        )
        clips, sentences = kitchen.generate(data.num_videos, data.clips_per_video, data.seed)
    logging.info(
        "data: %d clips in %d videos, %d sentences",
        len(clips),
        len(set(clips.video_id)),
        len(sentences),
    )
    return clips, sentences
