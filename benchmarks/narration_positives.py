"""The streamed evaluation with single-instance positives (`eval.positives=narration`) at
EK-100 test size: their ranks from the class pass's blocks against a second ranking.

  python benchmarks/narration_positives.py [--epic ../shared/data/epic100] [--rounds 5]

Needs only `pip install -e .`. Inputs: random 256-d unit embeddings of the 9668 test clips
and 3842 sentences, the class relevance of their CSVs, and as positives the sentence each
clip is narrated with (what `TestSplit.instance_relevance` gives the evaluator). With the
command line's process settings (`jaxsvr.runtime.process_tuning`), in one process,
alternating for `--rounds`:

- `second_pass`: `stream_stats` against the class relevance, then again against the
  positives (the evaluator before, and still the JAX engine's way);
- `fused`: one `stream_stats` with `positives=blocks.Positives(...)`
  (`query_stats.positive_ranks` on the same similarity blocks).

Prints the CPU model, per-round seconds and whether the positives' n_pos, first_pos and
last_pos are equal in both directions; `blocks.Positives` itself is timed once.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from jaxsvr.runtime import process_tuning

process_tuning.prefer_avx2_sort()  # as python -m jaxsvr.evaluate, before NumPy is imported
process_tuning.keep_freed_memory()

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_EPIC = ROOT.parent / "shared" / "data" / "epic100"


def main() -> None:
    from evaluation_speed import cpu_model  # beside this script

    from jaxsvr.annotations import epic100
    from jaxsvr.evaluation import blocks
    from jaxsvr.evaluation.streamed import stream_stats
    from jaxsvr.relevance import class_relevance

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epic", type=Path, default=DEFAULT_EPIC)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    clips = epic100.read_clips(args.epic / epic100.TEST_CLIPS)
    sents = epic100.read_sentences(args.epic / epic100.TEST_SENTENCES, clips)
    rel = class_relevance(
        clips.verb_classes, clips.noun_classes, sents.verb_classes, sents.noun_classes
    )
    row = {n: i for i, n in enumerate(sents.narration)}
    instance = np.zeros(rel.shape, np.float32)
    instance[np.arange(len(clips)), [row[n] for n in clips.narration]] = 1
    rng = np.random.default_rng(0)
    video, text = (rng.standard_normal((n, 256)).astype(np.float32) for n in rel.shape)
    for e in (video, text):
        e /= np.linalg.norm(e, axis=1, keepdims=True)
    scores = blocks.Embeddings(video, text)
    start = time.perf_counter()
    positives = blocks.Positives(instance)
    report = {"cpu": cpu_model(), "positives_seconds": time.perf_counter() - start}
    seconds: dict = {"second_pass": [], "fused": []}
    for _ in range(args.rounds):
        start = time.perf_counter()
        stream_stats(scores, blocks.MatrixRelevance(rel))
        ranked = stream_stats(scores, blocks.MatrixRelevance(instance))
        seconds["second_pass"].append(time.perf_counter() - start)
        start = time.perf_counter()
        fused = stream_stats(scores, blocks.MatrixRelevance(rel), positives=positives)
        seconds["fused"].append(time.perf_counter() - start)
    report["seconds"] = seconds
    report["equal"] = all(
        np.array_equal(getattr(fused[2 + d], f), getattr(ranked[d], f))
        for d in (0, 1)
        for f in ("n_pos", "first_pos", "last_pos")
    )
    print(report["cpu"])
    for name, values in seconds.items():
        print(f"{name}: {min(values):.2f}–{max(values):.2f} s over {args.rounds} rounds")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
