"""Time and peak memory of the streamed evaluation at 1x, 10x and 100x EK-100 entries.

  python benchmarks/streamed_evaluation.py [--scales 1 10 100] [--epic ../shared/data/epic100]
      [--memory-mb 1024] [--workers N] [--backend numpy|jax] [--json out.json]

Needs only `pip install -e .`. The EK-100 test tables (9668 clips x 3842 sentences) are
tiled to `scale` times their entries, sqrt(scale) times each side (100x: 96,680 clips x
38,420 sentences; row i takes the classes of row i mod n), with random 256-d unit
embeddings written to .npy files and memory-mapped, as `python -m jaxsvr.evaluate
--embeddings` reads them. Each scale runs in a fresh subprocess, with the command line's
process settings (`jaxsvr.runtime.process_tuning`), and reports:

- `seconds`: `streamed.evaluate_embeddings` (every metric, both directions), the
  factorisation of the class sets included;
- `cpu_seconds`: CPU time of the same (user + system, all threads), and the 1-minute
  load average at its end: on a shared machine the wall time depends on the load;
- `peak_rss_mb`: the process's peak resident memory (embeddings, class sets and
  per-query statistics included; the interpreter and NumPy alone hold ~40 MB);
- at 1x also `dense_seconds` / `dense_peak_rss_mb`: `metrics.evaluate` on the
  materialised similarity and relevance in another fresh process (the matrices' products
  and class relevance not timed), and `same`: whether both gave every key equal.

`--backend jax` times the accelerators' engine instead (`jax_engine.stream_stats`: each
block's product, relevance gather and ranking on JAX's default device): `first_seconds`
is the first call (compiles included), `seconds` a second call, `device_peak_mb` the
device's peak memory where JAX reports it; at 1x `max_difference` is the largest
difference of an nDCG or mAP from the NumPy engine's streamed run and `differing` the
keys that differ at all (a GPU's float32 product sums in another order than the CPU's,
so near-ties may rank differently, and the count of tied scores moves with them).

Prints the CPU model, a markdown table and one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_EPIC = ROOT.parent / "shared" / "data" / "epic100"
DIM = 256


def _child(
    scale: float, epic: Path, tmp: Path, memory: int, workers: int | None, dense: bool, backend: str
):
    from jaxsvr.runtime import process_tuning

    process_tuning.prefer_avx2_sort()  # as python -m jaxsvr.evaluate does, before NumPy
    process_tuning.keep_freed_memory()
    import numpy as np

    from jaxsvr.annotations import epic100
    from jaxsvr.evaluation import metrics, streamed
    from jaxsvr.relevance import class_relevance

    clips = epic100.read_clips(epic / epic100.TEST_CLIPS)
    sents = epic100.read_sentences(epic / epic100.TEST_SENTENCES, clips)
    side = math.sqrt(scale)
    rows = [np.arange(round(n * side)) % n for n in (len(clips), len(sents))]
    sets = [
        clips.verb_classes.take(rows[0]),
        clips.noun_classes.take(rows[0]),
        sents.verb_classes.take(rows[1]),
        sents.noun_classes.take(rows[1]),
    ]
    rng = np.random.default_rng(0)
    paths = []
    for name, r in zip(("video", "text"), rows):
        path = tmp / f"{name}_{scale}.npy"
        e = np.lib.format.open_memmap(path, "w+", np.float32, (r.size, DIM))
        for start in range(0, r.size, 1 << 16):  # in chunks: the file, not memory, holds it
            chunk = rng.standard_normal((min(1 << 16, r.size - start), DIM), np.float32)
            chunk /= np.linalg.norm(chunk, axis=1, keepdims=True)
            e[start : start + chunk.shape[0]] = chunk
        e.flush()
        del e
        paths.append(path)
    video, text = (np.load(p, mmap_mode="r") for p in paths)
    out = {"scale": scale, "clips": len(video), "sentences": len(text)}
    if backend == "jax":
        out.update(_jax_run(video, text, sets))  # its "metrics" too
    elif dense:
        sim = video @ text.T
        rel = class_relevance(*sets)
        start = time.perf_counter()
        out["metrics"] = metrics.evaluate(sim, rel, backend="numpy")
        out["seconds"] = time.perf_counter() - start
    else:
        cpu, start = _cpu_seconds(), time.perf_counter()
        out["metrics"] = streamed.evaluate_embeddings(
            video, text, streamed.class_terms(*sets), memory=memory, workers=workers
        )
        out["seconds"] = time.perf_counter() - start
        out["cpu_seconds"] = _cpu_seconds() - cpu
        out["load_average"] = os.getloadavg()[0]
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def _jax_run(video, text, sets) -> dict:
    import jax

    from jaxsvr.evaluation import blocks, jax_engine, metrics, streamed

    device = jax.devices()[0]
    out = {"device": f"{device.platform}: {device.device_kind}"}
    scores = blocks.Embeddings(video, text)
    relevance = blocks.BlockRelevance(streamed.class_terms(*sets))
    for key in ("first_seconds", "seconds"):
        cpu, start = _cpu_seconds(), time.perf_counter()
        result = metrics.summarize(*jax_engine.stream_stats(scores, relevance))
        out[key] = time.perf_counter() - start
    out["cpu_seconds"] = _cpu_seconds() - cpu
    out["load_average"] = os.getloadavg()[0]
    peak = (device.memory_stats() or {}).get("peak_bytes_in_use")
    out["device_peak_mb"] = peak / 2**20 if peak else None
    out["metrics"] = result
    return out


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _run_child(args, scale: float, dense: bool, tmp: Path, backend: str) -> dict:
    cmd = [sys.executable, __file__, "--child", str(scale), "--epic", str(args.epic)]
    cmd += ["--memory-mb", str(args.memory_mb), "--tmp", str(tmp)]
    if args.workers:
        cmd += ["--workers", str(args.workers)]
    if dense:
        cmd.append("--dense")
    cmd += ["--backend", backend]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"scale {scale:g} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores"
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scales", type=float, nargs="+", default=[1, 10, 100])
    p.add_argument("--epic", type=Path, default=DEFAULT_EPIC)
    p.add_argument("--memory-mb", type=int, default=1024)
    p.add_argument("--workers", type=int)
    p.add_argument("--backend", choices=("numpy", "jax"), default="numpy")
    p.add_argument("--json", type=Path)
    p.add_argument("--child", type=float, help=argparse.SUPPRESS)
    p.add_argument("--dense", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--tmp", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child is not None:
        _child(
            args.child,
            args.epic,
            args.tmp,
            args.memory_mb << 20,
            args.workers,
            args.dense,
            args.backend,
        )
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for scale in args.scales:
            run = _run_child(args, scale, False, Path(tmp), args.backend)
            if scale == 1 and args.backend == "jax":
                numpy = _run_child(args, scale, False, Path(tmp), "numpy")
                run["numpy_seconds"] = numpy["seconds"]
                diff = {k: abs(v - numpy["metrics"][k]) for k, v in run["metrics"].items()}
                run["max_difference"] = max(v for k, v in diff.items() if k[:3] in ("ndc", "map"))
                run["differing"] = sorted(k for k, v in diff.items() if v)
            elif scale == 1:
                dense = _run_child(args, scale, True, Path(tmp), "numpy")
                run["dense_seconds"] = dense["seconds"]
                run["dense_peak_rss_mb"] = dense["peak_rss_mb"]
                run["same"] = dense["metrics"] == run["metrics"]
            rows.append(run)
            print(
                f"{scale:g}x: {run['seconds']:.1f} s ({run['cpu_seconds']:.1f} CPU s, load "
                f"{run['load_average']:.1f}), {run['peak_rss_mb']:.0f} MB",
                flush=True,
            )
    print(f"\nCPU: {_cpu_model()}\n")
    if args.backend == "jax":
        _jax_table(rows)
    else:
        _numpy_table(rows)
    for r in rows:
        r.pop("metrics")
    text = json.dumps({"cpu": _cpu_model(), "runs": rows}, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


def _jax_table(rows: list[dict]) -> None:
    print(f"device: {rows[0]['device']}\n")
    print("| entries | clips x sentences | first call s | s | device peak MB | host RSS MB |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        peak = f"{r['device_peak_mb']:.0f}" if r["device_peak_mb"] else "-"
        print(
            f"| {r['scale']:g}x | {r['clips']} x {r['sentences']} | {r['first_seconds']:.2f} | "
            f"{r['seconds']:.2f} | {peak} | {r['peak_rss_mb']:.0f} |"
        )


def _numpy_table(rows: list[dict]) -> None:
    print("| entries | clips x sentences | streamed s | CPU s | peak RSS MB | dense s | dense MB |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        dense = (
            f"{r['dense_seconds']:.2f} | {r['dense_peak_rss_mb']:.0f}"
            if "dense_seconds" in r
            else "- | -"
        )
        print(
            f"| {r['scale']:g}x | {r['clips']} x {r['sentences']} | {r['seconds']:.2f} | "
            f"{r['cpu_seconds']:.1f} | {r['peak_rss_mb']:.0f} | {dense} |"
        )


if __name__ == "__main__":
    main()
