"""Query latency of `jaxsvr.runs.gallery` against the 9668 EK-100 test clips (target <= 50 ms
per query once the embeddings are cached).

  python benchmarks/retrieve_speed.py [--annotations ../shared/data/epic100] [--model mme]
      [--workdir /tmp/jaxsvr_retrieve_bench] [--queries 50]

Trains a short run on the EK-100 annotations with synthetic features (one epoch, or
reuses the workdir's checkpoint), then times, in one process: loading the run (config,
vocabulary, checkpoint), the first gallery (rebuilding the test split and embedding its
9668 clips and 3842 sentences, then caching them), the cached gallery, the first query
(compiling the text encoder) and `--queries` queries after it (test sentences, each
tokenised, encoded and scored against every clip: median, p90 and max). Also times the
whole command `python -m jaxsvr.retrieve` from the cache. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from jaxsvr.runtime import cli

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {"mme": "configs/epic_mme.py", "jpose": "configs/epic_jpose.py"}


def train(args) -> None:
    if (Path(args.workdir) / "metrics.json").is_file():
        print(f"reusing the run in {args.workdir}", file=sys.stderr)
        return
    cmd = [
        sys.executable,
        "-m",
        "jaxsvr.main",
        f"--config={CONFIGS[args.model]}",
        f"--workdir={args.workdir}",
        f"--config.data.annotations={args.annotations}",
        "--config.train.num_epochs=1",
        "--config.train.batch_size=128",
        "--config.eval.every_epochs=1",
    ]
    print("training:", " ".join(cmd[2:]), file=sys.stderr)
    subprocess.run(cmd, check=True, cwd=ROOT)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--annotations", default=str(ROOT.parent / "shared" / "data" / "epic100"))
    p.add_argument("--model", choices=sorted(CONFIGS), default="mme")
    p.add_argument("--workdir", default="/tmp/jaxsvr_retrieve_bench")
    p.add_argument("--queries", type=cli.number(int, 1), default=50)
    args = p.parse_args()
    if not Path(args.annotations).is_dir():
        print(f"error: no EK-100 annotations in {args.annotations}", file=sys.stderr)
        return 2
    train(args)

    from jaxsvr.runs.gallery import CACHE, Gallery, Retriever, TrainedRun

    rows = []

    def timed(what, fn):
        start = time.perf_counter()
        out = fn()
        rows.append((what, time.perf_counter() - start))
        return out

    run = timed(
        "load the run (config, vocabulary, checkpoint)",
        lambda: TrainedRun.load(args.workdir),
    )
    for cached in Path(args.workdir, CACHE).glob("*"):
        cached.unlink()
    timed("first gallery: rebuild + embed the test split, cache it", lambda: Gallery.of(run))
    gallery = timed("cached gallery", lambda: Gallery.of(run))
    searcher = Retriever(run, gallery)
    sentences = gallery.sentences["narration"]
    n_clips = len(gallery.clips["narration_id"])
    timed("first query (compiles the text encoder)", lambda: searcher.clips(sentences[0], 10))
    picks = np.random.default_rng(0).choice(len(sentences), args.queries, replace=False)
    seconds = []
    for j in picks:
        start = time.perf_counter()
        searcher.clips(sentences[j], 10)
        seconds.append(time.perf_counter() - start)
    seconds = np.asarray(seconds)
    env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "jaxsvr.retrieve",
            "--workdir",
            args.workdir,
            "--query",
            "wash the pan",
        ],
        check=True,
        cwd=ROOT,
        env=env,
        capture_output=True,
    )
    command = time.perf_counter() - start

    print(f"\n{args.model}, {n_clips} test clips x {len(sentences)} sentences\n")
    print("| step | seconds |\n| --- | --- |")
    for what, s in rows:
        print(f"| {what} | {s:.3f} |")
    print(
        f"| query, median of {len(seconds)} (p90, max) | {np.median(seconds) * 1e3:.1f} ms "
        f"({np.percentile(seconds, 90) * 1e3:.1f}, {seconds.max() * 1e3:.1f}) |"
    )
    print(f"| `python -m jaxsvr.retrieve` from the cache, whole command | {command:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
