"""Speed and memory of relevance and evaluation at the full EPIC-KITCHENS-100 test size.

  python benchmarks/evaluation_speed.py [--epic ../shared/data/epic100] [--repeats 3]
      [--skip-baseline] [--with-jax-cpu] [--json out.json]

Needs only `pip install -e .` (no test extras). Each measurement runs in a fresh
subprocess (so peak RSS is its own) on the same inputs: the real 9668 x 3842 test
relevance from the CSVs and a random similarity matrix without ties (so the official-style
evaluation is deterministic and comparable):

- `ours`: `jaxsvr.evaluation.evaluate` (NumPy engine), nDCG + mAP + all other metrics in
  both directions; wall time of the call, peak RSS of the process (inputs included);
- `baseline`: the straightforward evaluation of the public code (`ek100_baseline.py`);
- `jax_cpu`: the jitted JAX engine on this CPU (the accelerator engine; slow on CPU);
- `relevance_cli`: `python -m jaxsvr.relevance epic100 ...` end to end (wall, peak RSS);
- `batch_512`: one 512 x 512 batch relevance matrix from `RelevanceIndex` (train clips).

Every measurement is repeated `--repeats` times, interleaved (ours, baseline, ours, ...),
and reported as a min-max range; the speed-up is baseline / ours within each repetition,
so its range compares runs taken under the same load. Prints the CPU model (and whether it
has AVX-512, which NumPy's sort uses), a markdown table with README's rows, and one JSON
object with every run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_EPIC = ROOT.parent / "shared" / "data" / "epic100"


def _inputs(epic: Path, tmp: Path):
    import numpy as np
    from ek100_baseline import tie_free_similarity  # beside this script

    from jaxsvr.annotations import epic100
    from jaxsvr.relevance import class_relevance

    clips = epic100.read_clips(epic / epic100.TEST_CLIPS)
    sents = epic100.read_sentences(epic / epic100.TEST_SENTENCES, clips)
    rel = class_relevance(
        clips.verb_classes, clips.noun_classes, sents.verb_classes, sents.noun_classes
    )
    np.save(tmp / "rel.npy", rel)
    np.save(tmp / "sim.npy", tie_free_similarity(rel.shape, seed=0))


def _child(what: str, tmp: Path, epic: Path) -> dict:
    import numpy as np

    out: dict = {}
    if what == "relevance_cli":
        start = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "jaxsvr.relevance",
                "epic100",
                "--clips",
                str(epic / "EPIC_100_retrieval_test.csv"),
                "--sentences",
                str(epic / "EPIC_100_retrieval_test_sentence.csv"),
                "--out",
                str(tmp / "rel_cli.npy"),
            ],
            check=True,
            capture_output=True,
        )
        out["seconds"] = time.perf_counter() - start
        # This process is fresh and ran only the CLI: its children's peak is the CLI's.
        out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        return out
    if what == "batch_512":
        from jaxsvr.annotations import epic100
        from jaxsvr.relevance import RelevanceIndex

        clips = epic100.read_clips(epic / epic100.TRAIN_CLIPS)
        index = RelevanceIndex(clips.verb_classes, clips.noun_classes)
        rng = np.random.default_rng(0)
        batches = [rng.choice(len(clips), 512, replace=False) for _ in range(200)]
        index.matrix(batches[0])
        start = time.perf_counter()
        for b in batches:
            index.matrix(b)
        out["ms_per_batch"] = (time.perf_counter() - start) / len(batches) * 1e3
        return out
    sim, rel = np.load(tmp / "sim.npy"), np.load(tmp / "rel.npy")
    start = time.perf_counter()
    if what == "ours":
        from jaxsvr.evaluation import evaluate

        result = evaluate(sim, rel, backend="numpy")
    elif what == "jax_cpu":
        from jaxsvr.evaluation import evaluate

        evaluate(sim[:64], rel[:64], backend="jax")  # compile small shapes only once
        start = time.perf_counter()
        result = evaluate(sim, rel, backend="jax")
    else:
        import ek100_baseline  # beside this script

        result = ek100_baseline.evaluate(sim, rel.astype(np.float64))
    out["seconds"] = time.perf_counter() - start
    out["peak_rss_mb"] = _peak_rss_mb()
    out["metrics"] = {k: result[k] for k in ("ndcg_avg", "map_avg")}
    return out


def _peak_rss_mb() -> float:
    """Peak RSS of this process image (VmHWM; ru_maxrss would include the parent's at fork)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_model() -> str:
    """The CPU's model name, core count and whether it has AVX-512 (from /proc/cpuinfo)."""
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    except OSError:
        import platform

        return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    flags = info.get("flags", "").split()
    simd = "AVX-512" if any(f.startswith("avx512") for f in flags) else "no AVX-512"
    simd = f"AVX2, {simd}" if "avx2" in flags else simd
    return (
        f"{info.get('model name', '?')} (family {info.get('cpu family', '?')} model "
        f"{info.get('model', '?')}), {os.cpu_count()} cores, {simd}"
    )


def _span(values: list[float], fmt: str) -> str:
    lo, hi = min(values), max(values)
    return (
        fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}–{fmt.format(hi)}"
    )


def table(report: dict) -> str:
    """README's rows: wall-time and peak-RSS ranges over the repetitions."""
    runs = report["runs"]
    rows = [
        ("`evaluate` (NumPy engine): nDCG + mAP + all variants, both directions", "ours"),
        ("straightforward NumPy evaluation (`benchmarks/ek100_baseline.py`)", "baseline"),
        ("JAX engine on this CPU (jitted, for accelerators)", "jax_cpu"),
        (
            "`python -m jaxsvr.relevance epic100` end to end (interpreter start included)",
            "relevance_cli",
        ),
    ]
    lines = ["| what (9668 × 3842) | wall | peak RSS (inputs included) |", "|---|---|---|"]
    for label, what in rows:
        if what not in runs:
            continue
        wall = _span([r["seconds"] for r in runs[what]], "{:.2f}") + " s"
        rss = [r["peak_rss_mb"] for r in runs[what] if "peak_rss_mb" in r]
        lines.append(f"| {label} | {wall} | {_span(rss, '{:.0f}') + ' MB' if rss else '—'} |")
    if "batch_512" in runs:
        ms = _span([r["ms_per_batch"] for r in runs["batch_512"]], "{:.2f}")
        lines.append(
            f"| `RelevanceIndex.matrix`, one 512 × 512 batch (train clips) | {ms} ms | — |"
        )
    if "speedup_vs_baseline" in report:
        lines.append(
            f"\nOurs vs the straightforward evaluation: "
            f"{_span(report['speedup_vs_baseline'], '{:.1f}')}× faster (per repetition), max abs "
            f"difference of nDCG/mAP {report['max_abs_diff_vs_baseline']:.1e}"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epic", type=Path, default=DEFAULT_EPIC)
    p.add_argument("--repeats", type=int, default=3, help="fresh processes per measurement")
    p.add_argument("--skip-baseline", action="store_true")
    p.add_argument("--with-jax-cpu", action="store_true", help="also time the JAX engine on CPU")
    p.add_argument("--json", type=Path, help="also write the JSON report here")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--tmp", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.tmp, args.epic)))
        return
    if not (args.epic / "EPIC_100_retrieval_test.csv").is_file():
        sys.exit(f"error: no EPIC_100_retrieval_test.csv in {args.epic}; pass --epic DIR")
    report: dict = {"cpu": cpu_model(), "repeats": args.repeats, "runs": {}}
    print(report["cpu"], file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        _inputs(args.epic, tmp)
        kinds = ["ours"] + ([] if args.skip_baseline else ["baseline"])
        kinds += ["relevance_cli", "batch_512"] + (["jax_cpu"] if args.with_jax_cpu else [])
        for rep in range(args.repeats):
            for what in kinds:
                r = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--child",
                        what,
                        "--tmp",
                        str(tmp),
                        "--epic",
                        str(args.epic),
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                    cwd=ROOT,
                )
                result = json.loads(r.stdout.strip().splitlines()[-1])
                report["runs"].setdefault(what, []).append(result)
                print(f"repeat {rep + 1}/{args.repeats} {what}: {result}", file=sys.stderr)
    runs = report["runs"]
    if "baseline" in runs:
        report["speedup_vs_baseline"] = [
            b["seconds"] / o["seconds"] for o, b in zip(runs["ours"], runs["baseline"])
        ]
        report["max_abs_diff_vs_baseline"] = max(
            abs(o["metrics"][k] - b["metrics"][k])
            for o, b in zip(runs["ours"], runs["baseline"])
            for k in o["metrics"]
        )
    print(f"{report['cpu']}; {args.repeats} fresh processes per row (min–max)")
    print(table(report))
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
