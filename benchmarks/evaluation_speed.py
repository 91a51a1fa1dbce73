"""Speed and memory of relevance and evaluation at the full EPIC-KITCHENS-100 test size.

  python benchmarks/evaluation_speed.py [--epic ../shared/data/epic100] [--repeats 3]
      [--skip-baseline] [--with-jax-cpu] [--kinds ours ours_avx2 ...] [--json out.json]

Needs only `pip install -e .` (no test extras). Each measurement runs in a fresh
subprocess (so peak RSS is its own) on the same inputs: the real 9668 x 3842 test
relevance from the CSVs and a random similarity matrix without ties (so the official-style
evaluation is deterministic and comparable):

- `ours`: `jaxsvr.evaluation.evaluate` (NumPy engine), nDCG + mAP + all other metrics in
  both directions; wall time and CPU time (all threads, page faults included) of a first
  and a second call, peak RSS of the process (inputs included);
- `ours_avx2` (AVX-512 CPUs only): the same with NumPy's AVX2 code paths
  (NPY_DISABLE_CPU_FEATURES, `jaxsvr.runtime.process_tuning`): what a CPU without AVX-512 runs,
  and what `python -m jaxsvr.evaluate` chooses on AMD Zen 4;
- `packed`, `packed_avx2`: the same with every block ranked by the packed 64-bit sort
  (`numpy_engine.query_stats(..., narrow=False)`), the engine before the 32-bit path;
- `evaluate_cli`: `python -m jaxsvr.evaluate --similarity S.npy --relevance R.npy` end to
  end, interpreter start, imports and loading included (JAX is not imported);
- `evaluate_cli_inside`: the same command run in the measuring process (`main()` of
  `jaxsvr.evaluate`, after the settings its `__main__` makes: NumPy's AVX2 sort on Zen 4,
  freed memory kept), timed around its `metrics.evaluate` call (the figure issue 31's
  part 5 sets: "inside `evaluate`"; inputs memory-mapped as the command maps them) and
  around `main()` (loading and checks included, interpreter start not);
- `baseline`: the straightforward evaluation of the public code (`tests/ek100_baseline.py`);
- `ranking`: the ranking step alone, video-to-text, one thread, two ways: the engine's
  packed int64 row sort (relevance in the low bits) against a float32 row sort plus a
  `searchsorted` of each row's relevant items (issue 18's idea; the relevant items come
  sorted per row, which the search needs to be fast);
- `jax_cpu`: the jitted JAX engine on this CPU (the accelerator engine; slow on CPU);
- `KIND:numpy` (e.g. `evaluate_cli_inside:numpy`): KIND with the engine's compiled
  kernel turned off (JAXSVR_COMPILED_KERNEL=0, `jaxsvr.evaluation.compiled_kernel`): its
  NumPy passes, the same statistics bit for bit; the default kinds include
  `ours_avx2:numpy` (or `ours:numpy`), `evaluate_cli_inside:numpy` and `evaluate_cli:numpy`;
- `relevance_cli`: `python -m jaxsvr.relevance epic100 ...` end to end (wall, peak RSS);
- `batch_512`: one 512 x 512 batch relevance matrix from `RelevanceIndex` (train clips).

Every measurement is repeated `--repeats` times, interleaved (ours, baseline, ours, ...),
and reported as a min-max range; the speed-ups are baseline / ours and baseline /
evaluate_cli within each repetition, so their ranges compare runs taken under the same
load. Prints the CPU model (and whether it
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

from jaxsvr.runtime import cli

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the official-style baseline, the tests' oracle
DEFAULT_EPIC = ROOT.parent / "shared" / "data" / "epic100"


def _inputs(epic: Path, tmp: Path):
    import numpy as np
    from ek100_baseline import tie_free_similarity  # tests/

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

    from jaxsvr.evaluation import compiled_kernel

    what = what.removesuffix(":numpy")  # the environment turned the kernel off
    out: dict = {"compiled_kernel": compiled_kernel.load() is not None}
    if what == "relevance_cli":
        out.update(
            _time_cli(
                "jaxsvr.relevance",
                "epic100",
                "--clips",
                epic / "EPIC_100_retrieval_test.csv",
                "--sentences",
                epic / "EPIC_100_retrieval_test_sentence.csv",
                "--out",
                tmp / "rel_cli.npy",
            )
        )
        del out["stdout"]
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
    if what == "evaluate_cli":
        out.update(
            _time_cli(
                "jaxsvr.evaluate", "--similarity", tmp / "sim.npy", "--relevance", tmp / "rel.npy"
            )
        )
        result = json.loads(out.pop("stdout"))
        out["metrics"] = {k: result[k] for k in ("ndcg_avg", "map_avg")}
        return out
    if what == "evaluate_cli_inside":
        return _inside_cli(tmp)
    sim, rel = np.load(tmp / "sim.npy"), np.load(tmp / "rel.npy")
    if what == "ranking":
        from ranking_variants import ranking_variants  # beside this script

        return ranking_variants(sim, rel)
    start, cpu = time.perf_counter(), time.process_time()
    if what.startswith("packed"):  # the engine with its packed 64-bit sort only
        import functools

        from jaxsvr.evaluation import numpy_engine

        numpy_engine.query_stats = functools.partial(numpy_engine.query_stats, narrow=False)
    if what in ("ours", "ours_avx2", "packed", "packed_avx2"):
        from jaxsvr.evaluation import evaluate

        result = evaluate(sim, rel, backend="numpy")
        out["seconds"] = time.perf_counter() - start
        out["cpu_seconds"] = time.process_time() - cpu  # all threads, page faults included
        # a second call: what every evaluation after the first costs in one process (the
        # first also faults in the memory malloc hands back to the OS between blocks)
        warm, cpu = time.perf_counter(), time.process_time()
        evaluate(sim, rel, backend="numpy")
        out["warm_seconds"] = time.perf_counter() - warm
        out["warm_cpu_seconds"] = time.process_time() - cpu
    elif what == "jax_cpu":
        from jaxsvr.evaluation import evaluate

        evaluate(sim[:64], rel[:64], backend="jax")  # compile small shapes only once
        start = time.perf_counter()
        result = evaluate(sim, rel, backend="jax")
    else:  # baseline, baseline_avx2
        import ek100_baseline  # tests/

        result = ek100_baseline.evaluate(sim, rel.astype(np.float64))
    out.setdefault("seconds", time.perf_counter() - start)
    out["peak_rss_mb"] = _peak_rss_mb()
    out["metrics"] = {k: result[k] for k in ("ndcg_avg", "map_avg")}
    return out


def _inside_cli(tmp: Path) -> dict:
    """`jaxsvr.evaluate`'s main() on the dense inputs in this process, set up as its
    `__main__` sets up its own (NumPy's code paths chosen by `_child_env`): seconds and CPU
    seconds of the `metrics.evaluate` call inside, and of main() as a whole."""
    import contextlib
    import io

    from jaxsvr import evaluate as command
    from jaxsvr.evaluation import metrics
    from jaxsvr.runtime import process_tuning

    process_tuning.keep_freed_memory()
    inner = metrics.evaluate
    out: dict = {}

    def timed(*args, **kwargs):
        start, cpu = time.perf_counter(), time.process_time()
        result = inner(*args, **kwargs)
        out.update(seconds=time.perf_counter() - start, cpu_seconds=time.process_time() - cpu)
        return result

    argv = ["--similarity", str(tmp / "sim.npy"), "--relevance", str(tmp / "rel.npy")]
    metrics.evaluate = timed
    try:
        start, cpu = time.perf_counter(), time.process_time()
        with contextlib.redirect_stdout(io.StringIO()):
            code = command.main(argv)
        out.update(main_seconds=time.perf_counter() - start, main_cpu=time.process_time() - cpu)
    finally:
        metrics.evaluate = inner
    if code:
        raise SystemExit(f"error: jaxsvr.evaluate main() returned {code}")
    out["peak_rss_mb"] = _peak_rss_mb()
    return out


def _time_cli(module: str, *args) -> dict:
    """Wall time, peak RSS and stdout of `python -m module args` end to end. This process
    is fresh and runs only that command: its children's peak RSS is the command's."""
    start = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", module, *map(str, args)], check=True, capture_output=True, text=True
    )
    return {
        "seconds": time.perf_counter() - start,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "stdout": r.stdout,
    }


def emit(report: dict, table_text: str, header: str, path: Path | None) -> None:
    """Prints the header line, the markdown table and the JSON report; writes the JSON to
    `path` too when given (the benchmarks' common ending)."""
    print(header)
    print(table_text)
    print(json.dumps(report, indent=1))
    if path:
        path.write_text(json.dumps(report, indent=1))


def _child_env(what: str) -> dict:
    """The environment of a measurement: NumPy's default code paths, or its AVX2 ones."""
    env = {k: v for k, v in os.environ.items() if k != "NPY_DISABLE_CPU_FEATURES"}
    if what.endswith(":numpy"):
        env["JAXSVR_COMPILED_KERNEL"] = "0"
        what = what.removesuffix(":numpy")
    sys.path.insert(0, str(ROOT))
    from jaxsvr.runtime import process_tuning

    if what.endswith("_avx2"):
        env["NPY_DISABLE_CPU_FEATURES"] = process_tuning._feature_names()
    elif what == "evaluate_cli_inside":  # as the command
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo = ""
        value = os.environ.get("NPY_DISABLE_CPU_FEATURES")
        value = value or process_tuning.avx2_sort_features(os.environ, cpuinfo)
        if value:
            env["NPY_DISABLE_CPU_FEATURES"] = value
    return env


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
        ("`evaluate` (CPU engine): nDCG + mAP + all variants, both directions", "ours"),
        ("the same, the engine's NumPy passes (compiled kernel off)", "ours:numpy"),
        ("`evaluate` with NumPy's AVX2 code paths (what CPUs without AVX-512 run)", "ours_avx2"),
        ("the same, NumPy passes", "ours_avx2:numpy"),
        ("`evaluate` with the packed 64-bit sort only (the engine before)", "packed"),
        ("the same with NumPy's AVX2 code paths", "packed_avx2"),
        ("`python -m jaxsvr.evaluate`: its `metrics.evaluate` call inside", "evaluate_cli_inside"),
        ("the same, NumPy passes", "evaluate_cli_inside:numpy"),
        ("`python -m jaxsvr.evaluate` end to end (interpreter start, loading)", "evaluate_cli"),
        ("the same, NumPy passes", "evaluate_cli:numpy"),
        ("straightforward NumPy evaluation (`tests/ek100_baseline.py`)", "baseline"),
        ("the same with NumPy's AVX2 code paths", "baseline_avx2"),
        ("JAX engine on this CPU (jitted, for accelerators)", "jax_cpu"),
        (
            "`python -m jaxsvr.relevance epic100` end to end (interpreter start included)",
            "relevance_cli",
        ),
    ]
    lines = [
        "| what (9668 × 3842) | wall | CPU time | peak RSS (inputs included) |",
        "|---|---|---|---|",
    ]
    for label, what in rows:
        if what not in runs:
            continue
        wall = _span([r["seconds"] for r in runs[what]], "{:.2f}") + " s"
        if "warm_seconds" in runs[what][0]:
            wall += f" (again: {_span([r['warm_seconds'] for r in runs[what]], '{:.2f}')} s)"
        cpu = "—"
        if "cpu_seconds" in runs[what][0]:
            cpu = _span([r["cpu_seconds"] for r in runs[what]], "{:.2f}") + " s"
            if "warm_cpu_seconds" in runs[what][0]:
                again = _span([r["warm_cpu_seconds"] for r in runs[what]], "{:.2f}")
                cpu += f" (again: {again} s)"
        if "main_seconds" in runs[what][0]:
            wall += f" (main(): {_span([r['main_seconds'] for r in runs[what]], '{:.2f}')} s)"
        rss = [r["peak_rss_mb"] for r in runs[what] if "peak_rss_mb" in r]
        rss_text = _span(rss, "{:.0f}") + " MB" if rss else "—"
        lines.append(f"| {label} | {wall} | {cpu} | {rss_text} |")
    if "batch_512" in runs:
        ms = _span([r["ms_per_batch"] for r in runs["batch_512"]], "{:.2f}")
        lines.append(
            f"| `RelevanceIndex.matrix`, one 512 × 512 batch (train clips) | {ms} ms | — | — |"
        )
    if "speedup_vs_baseline" in report:
        lines.append(
            f"\nOurs vs the straightforward evaluation: "
            f"{_span(report['speedup_vs_baseline'], '{:.1f}')}× faster (per repetition), the "
            f"whole `python -m jaxsvr.evaluate` process "
            f"{_span(report['cli_speedup_vs_baseline'], '{:.1f}')}×; max abs difference of "
            f"nDCG/mAP {report['max_abs_diff_vs_baseline']:.1e}"
        )
    if "ranking" in runs:
        packed = [r["packed_int64_sort"] for r in runs["ranking"]]
        searched = [r["float32_sort_searchsorted"] for r in runs["ranking"]]
        lines.append(
            f"Ranking alone (v2t, one thread): packed int64 sort {_span(packed, '{:.2f}')} s, "
            f"float32 sort + searchsorted {_span(searched, '{:.2f}')} s"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epic", type=Path, default=DEFAULT_EPIC)
    p.add_argument(
        "--repeats", type=cli.number(int, 1), default=3, help="fresh processes per measurement"
    )
    p.add_argument("--skip-baseline", action="store_true")
    p.add_argument("--with-jax-cpu", action="store_true", help="also time the JAX engine on CPU")
    p.add_argument("--json", type=Path, help="also write the JSON report here")
    p.add_argument("--kinds", nargs="+", help="only these measurements (e.g. ours ours_avx2)")
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
        avx512 = report["cpu"].endswith(", AVX-512")
        kinds = ["ours"] + (["ours_avx2"] if avx512 else []) + ["evaluate_cli"]
        kinds += ["evaluate_cli_inside"]
        kinds += ["packed"] + (["packed_avx2"] if avx512 else [])
        if not args.skip_baseline:
            kinds += ["baseline"] + (["baseline_avx2"] if avx512 else [])
        kinds += ["ranking", "relevance_cli", "batch_512"]
        kinds += ["jax_cpu"] if args.with_jax_cpu else []
        numpy_passes = ["ours_avx2" if avx512 else "ours", "evaluate_cli_inside", "evaluate_cli"]
        kinds += [f"{k}:numpy" for k in numpy_passes]
        kinds = args.kinds or kinds  # as named: a kind's `:numpy` twin need not be listed
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
                    env=_child_env(what),
                )
                result = json.loads(r.stdout.strip().splitlines()[-1])
                report["runs"].setdefault(what, []).append(result)
                print(f"repeat {rep + 1}/{args.repeats} {what}: {result}", file=sys.stderr)
    runs = report["runs"]
    # The comparisons need the baseline, ours and the command: --kinds may leave some out.
    if all(k in runs for k in ("baseline", "ours", "evaluate_cli")):
        # On AVX-512 CPUs the ratios use the faster of the baseline's two code paths.
        base = [
            min(b["seconds"] for b in group)
            for group in zip(runs["baseline"], runs.get("baseline_avx2", runs["baseline"]))
        ]
        report["speedup_vs_baseline"] = [b / o["seconds"] for o, b in zip(runs["ours"], base)]
        report["cli_speedup_vs_baseline"] = [
            b / c["seconds"] for c, b in zip(runs["evaluate_cli"], base)
        ]
        report["max_abs_diff_vs_baseline"] = max(
            abs(o["metrics"][k] - b["metrics"][k])
            for what in ("ours", "evaluate_cli")
            for o, b in zip(runs[what], runs["baseline"])
            for k in o["metrics"]
        )
    header = f"{report['cpu']}; {args.repeats} fresh processes per row (min–max)"
    emit(report, table(report), header, args.json)


if __name__ == "__main__":
    main()
