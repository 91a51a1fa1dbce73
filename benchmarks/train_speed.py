"""Train steps/s at the published batch on the EPIC-100 annotations with synthetic
features, and the share of time the training loop waits for the host pipeline (target:
below 5%). Default: JPoSE (64 anchors x 10 triplets x 3 levels, 3072-d features).

  python benchmarks/train_speed.py [--annotations ../shared/data/epic100] [--epochs 1]
  python benchmarks/train_speed.py --config configs/epic_hgr.py:ranp --gather device \
      --max-steps 100
  python benchmarks/train_speed.py --config configs/epic_contra.py --max-steps 30 --log-every 5
  python benchmarks/train_speed.py --config configs/epic_contra.py --set matmul_precision=highest

Each setting runs `python -m jaxsvr.main` in a fresh process for `--epochs` epochs and
reads the steady-state rates from its metrics.jsonl (log intervals after the first, so
compilation is left out). Settings: `train.gather = device` (default: features on the
device, the step gathers rows) and `host` (a background thread gathers the rows).
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(annotations: str, epochs: int, extra: list[str], config: str, log_every: int) -> dict:
    """Steady-state rates of one run (log intervals after the first and before the last)."""
    with tempfile.TemporaryDirectory() as workdir:
        cmd = [
            sys.executable,
            "-m",
            "jaxsvr.main",
            f"--config={config}",
            f"--workdir={workdir}",
            f"--config.data.annotations={annotations}",
            f"--config.train.num_epochs={epochs}",
            f"--config.train.log_every_steps={log_every}",
            "--config.checkpoint.every_steps=1000000",
            *extra,
        ]
        subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True)
        rows = [json.loads(x) for x in Path(workdir, "metrics.jsonl").read_text().splitlines()]
        train = [r for r in rows if "train/steps_per_sec" in r][1:-1]
        return {
            "steps_per_sec": sum(r["train/steps_per_sec"] for r in train) / len(train),
            "host_wait": sum(r["train/host_wait"] for r in train) / len(train),
            "steps": train[-1]["step"],
        }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--annotations", default=str(ROOT.parent / "shared/data/epic100"))
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--config", default="configs/epic_jpose.py")
    p.add_argument("--gather", nargs="+", default=["device", "host"], choices=["device", "host"])
    p.add_argument(
        "--max-steps", type=int, default=0, help="stop after this many steps (0: whole epochs)"
    )
    p.add_argument(
        "--log-every", type=int, default=25, help="steps per rate sample (3+ samples needed)"
    )
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    args = p.parse_args()
    extra = ["--config.eval.every_epochs=1000", *(f"--config.{kv}" for kv in args.set)]
    if args.max_steps:
        extra.append(f"--config.train.max_steps={args.max_steps}")
    print(" ".join([args.config, *args.set]))
    print("| gather | steps/s | ms/step | host wait |")
    print("|---|---|---|---|")
    for gather in args.gather:
        flags = [f"--config.train.gather={gather}", *extra]
        m = measure(args.annotations, args.epochs, flags, args.config, args.log_every)
        print(
            f"| {gather} | {m['steps_per_sec']:.2f} | {1000 / m['steps_per_sec']:.0f} | "
            f"{100 * m['host_wait']:.1f}% |",
            flush=True,
        )


if __name__ == "__main__":
    main()
