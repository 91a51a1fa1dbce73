"""Speed and memory of relevance and evaluation at the full EPIC-KITCHENS-100 test size.

  python benchmarks/evaluation_speed.py [--epic ../shared/data/epic100] [--skip-baseline]

Each measurement runs in a fresh subprocess (so peak RSS is its own) on the same inputs:
the real 9668 x 3842 test relevance from the CSVs and a random similarity matrix without
ties (so the official-style evaluation is deterministic and comparable):

- `ours`: `jaxsvr.evaluation.evaluate` (NumPy engine), nDCG + mAP + all other metrics in
  both directions; wall time of the call, peak RSS of the process (inputs included);
- `baseline`: the straightforward evaluation of the public code (`ek100_baseline.py`);
- `jax_cpu`: the jitted JAX engine on this CPU (the accelerator engine; slow on CPU);
- `relevance_cli`: `python -m jaxsvr.relevance epic100 ...` end to end (wall);
- `batch_512`: one 512 x 512 batch relevance matrix from `RelevanceIndex` (train clips).
Prints one JSON object; README quotes the figures. Compare ratios from one run only.
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

    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import tie_free_similarity

    from jaxsvr.data import epic100
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
        return out
    if what == "batch_512":
        from jaxsvr.data import epic100
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
        sys.path.insert(0, str(ROOT / "benchmarks"))
        import ek100_baseline

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


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epic", type=Path, default=DEFAULT_EPIC)
    p.add_argument("--skip-baseline", action="store_true")
    p.add_argument("--with-jax-cpu", action="store_true", help="also time the JAX engine on CPU")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--tmp", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.tmp, args.epic)))
        return
    report = {"cpu_count": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        _inputs(args.epic, tmp)
        runs = ["ours", "relevance_cli", "batch_512"]
        runs += [] if args.skip_baseline else ["baseline"]
        runs += ["jax_cpu"] if args.with_jax_cpu else []
        for what in runs:
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
            report[what] = json.loads(r.stdout.strip().splitlines()[-1])
            print(what, report[what], file=sys.stderr)
    if "baseline" in report:
        ours, base = report["ours"], report["baseline"]
        report["speedup_vs_baseline"] = base["seconds"] / ours["seconds"]
        report["max_abs_diff_vs_baseline"] = max(
            abs(ours["metrics"][k] - base["metrics"][k]) for k in ours["metrics"]
        )
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
