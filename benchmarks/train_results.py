"""Trains one of the README's result grids on the EPIC-100 annotations with synthetic
features and prints a markdown table (mean and half-range over seeds).

  python benchmarks/train_results.py --grid triplet --epochs 10 --seeds 0 1
  python benchmarks/train_results.py --grid hgr --epochs 4 --seeds 0 1
  python benchmarks/train_results.py --grid heads --epochs 20 --seeds 0 1
  python benchmarks/train_results.py --grid contra --epochs 10 --seeds 0 1
  python benchmarks/train_results.py --grid proxy --epochs 5 --seeds 0 1

Grids: `triplet` (MME and JPoSE, fixed vs relevance margin), `hgr` (HGR with hard
negatives, RAN, RANP, relevance margin), `heads` (projection heads with MI-MM, adaptive
MI-MM, SMS), `contra` (ConTra: clip context m = 0..5, text and both contexts; RSum is
then single-instance, `eval.positives=narration`), `proxy` (MME on the EPIC annotations in
YouCook2 form, `python -m jaxsvr.data.youcook2`, with classes from the captions via the
EPIC class CSVs: instance triplets vs thresholded semantic triplets under the SYN proxy at
several T, all evaluated with SYN relevance). `--set KEY=VALUE` adds `--config.KEY=VALUE`
to every run.

Each run is `python -m jaxsvr.main` in its own workdir under --out (an existing finished
workdir is reused: rerunning resumes or re-evaluates it). The seed sets `config.seed`
(initialisation, sampling, batch order); the synthetic features stay those of
feature_seed 0, so seeds vary the training, not the data.
"""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GRIDS = {
    "triplet": [
        ("MME, fixed margin", "configs/epic_mme.py:margin=fixed"),
        ("MME, relevance margin", "configs/epic_mme.py:margin=relevance"),
        ("JPoSE, fixed margin", "configs/epic_jpose.py:margin=fixed"),
        ("JPoSE, relevance margin", "configs/epic_jpose.py:margin=relevance"),
    ],
    "hgr": [
        ("HGR, hard negatives", "configs/epic_hgr.py:hard"),
        ("HGR, RAN (tau 0.75)", "configs/epic_hgr.py:ran"),
        ("HGR, RANP (tau 0.4)", "configs/epic_hgr.py:ranp"),
        ("HGR, relevance margin", "configs/epic_hgr.py:relmargin"),
    ],
    "heads": [
        ("Heads, MI-MM", "configs/epic_sms.py:mimm"),
        ("Heads, adaptive MI-MM", "configs/epic_sms.py:adaptive"),
        ("Heads, SMS", "configs/epic_sms.py:sms"),
    ],
    "contra": [
        *(
            (f"ConTra, clip context m = {m}", f"configs/epic_contra.py:m={m}")
            for m in range(6)  # m = 0: no context
        ),
        ("ConTra, text context m = 4", "configs/epic_contra.py:context=text"),
        ("ConTra, clip + text context m = 4", "configs/epic_contra.py:context=both"),
    ],
    "proxy": [
        ("MME, instance triplets (SYN eval)", "configs/youcook2_mme.py:proxy=syn,instance"),
        *(
            (f"MME, SYN triplets T = {t}", f"configs/youcook2_mme.py:proxy=syn,t={t}")
            for t in ("0.2", "0.4", "0.6")
        ),
    ],
}
KEYS = ("ndcg_avg", "map_avg", "ndcg_v2t", "ndcg_t2v", "map_v2t", "map_t2v", "rsum")


def run(config: str, seed: int, args) -> dict:
    name = config.split("/")[-1].replace(".py:", "_").replace("=", "-").replace(",", "_")
    workdir = Path(args.out) / f"{name}_seed{seed}"
    data = [f"--config.data.annotations={args.annotations}"]
    if args.grid == "proxy":
        data = [
            f"--config.data.annotations={youcook2_style(args)}",
            f"--config.data.syn_classes={args.annotations}",
        ]
    cmd = [
        sys.executable,
        "-m",
        "jaxsvr.main",
        f"--config={config}",
        f"--workdir={workdir}",
        *data,
        f"--config.seed={seed}",
        f"--config.train.num_epochs={args.epochs}",
        f"--config.eval.every_epochs={args.epochs}",
        "--config.train.log_every_steps=100",
        *(f"--config.{kv}" for kv in args.set),
    ]
    subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True)
    return json.loads((workdir / "metrics.json").read_text())


def youcook2_style(args) -> Path:
    """The EPIC annotations in YouCook2 form, written once under --out."""
    path = Path(args.out) / "epic_youcook2_style.json"
    if not path.is_file():
        Path(args.out).mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "jaxsvr.data.youcook2",
                "--epic",
                args.annotations,
                "--out",
                str(path),
            ],
            check=True,
            cwd=ROOT,
            capture_output=True,
        )
    return path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--annotations", default=str(ROOT.parent / "shared/data/epic100"))
    p.add_argument("--grid", choices=sorted(GRIDS), default="triplet")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--out", default="/tmp/jaxsvr_results")
    p.add_argument("--only", nargs="*", help="substrings of the grid names to run")
    args = p.parse_args()
    results = {}
    for label, config in GRIDS[args.grid]:
        if args.only and not any(s in label for s in args.only):
            continue
        runs = [run(config, seed, args) for seed in args.seeds]
        results[label] = runs
        for seed, m in zip(args.seeds, runs):
            print(
                f"{label} seed {seed}: nDCG {m['ndcg_avg']:.4f} mAP {m['map_avg']:.4f} "
                f"({m['train_seconds']:.0f}s)",
                file=sys.stderr,
                flush=True,
            )
    Path(args.out, f"results_{args.grid}.json").write_text(json.dumps(results, indent=1))
    print(f"| model | nDCG | mAP | RSum | seeds |  (EPIC-100 test, {args.epochs} epochs)")
    print("|---|---|---|---|---|")
    for label, runs in results.items():
        cells = []
        for key in ("ndcg_avg", "map_avg", "rsum"):
            vals = [m[key] * (1 if key == "rsum" else 100) for m in runs]
            spread = (max(vals) - min(vals)) / 2
            cells.append(f"{statistics.mean(vals):.1f} ± {spread:.1f}")
        print(f"| {label} | {' | '.join(cells)} | {len(runs)} |")


if __name__ == "__main__":
    main()
