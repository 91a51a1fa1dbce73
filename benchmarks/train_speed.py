"""Train steps/s at the published batch on the EPIC-100 annotations with synthetic
features, and the share of time the training loop waits for the host pipeline (target:
below 5%). Default: JPoSE (64 anchors x 10 triplets x 3 levels, 3072-d features).

  python benchmarks/train_speed.py [--annotations ../shared/data/epic100] [--epochs 1]
  python benchmarks/train_speed.py --config configs/epic_hgr.py:ranp --gather device \
      --max-steps 100
  python benchmarks/train_speed.py --config configs/epic_contra.py --max-steps 30 --log-every 5
  python benchmarks/train_speed.py --config configs/epic_contra.py --set matmul_precision=highest
  python benchmarks/train_speed.py --host-gather-profile   # the host gather of one batch

Each setting runs `python -m jaxsvr.main` in a fresh process for `--epochs` epochs and
reads the steady-state rates from its metrics.jsonl (log intervals after the first, so
compilation is left out), and its peak resident memory (compilation and the final
evaluation included). Settings: `train.gather = device` (default: features on the
device, the step gathers rows) and `host` (a background thread gathers the rows). The
command's environment is this one's: set `GLIBC_TUNABLES=...` or `JAXSVR_HUGE_PAGES=0` in
front of this script to try other malloc settings (docs/training.md#the-process-on-a-cpu).

`--host-gather-profile` times, without training, what `train.gather=host` does per step
for JPoSE: gather the batch's feature rows (64 anchors x 61 rows of the EPIC train
table, 3072-d float32: 48 MB) with `model_inputs.gather_rows` into a fresh buffer, then
copy them to the device (`parallel.global_batch`); medians over --repeats batches.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from jaxsvr.runtime import cli

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
        peak_rss = run_child(cmd)
        rows = [json.loads(x) for x in Path(workdir, "metrics.jsonl").read_text().splitlines()]
        train = [r for r in rows if "train/steps_per_sec" in r][1:-1]
        return {
            "steps_per_sec": sum(r["train/steps_per_sec"] for r in train) / len(train),
            "host_wait": sum(r["train/host_wait"] for r in train) / len(train),
            "steps": train[-1]["step"],
            "peak_rss_gb": peak_rss / 1e9,
        }


def run_child(cmd: list[str]) -> int:
    """Runs `cmd` in ROOT; returns its peak resident memory in bytes (its own, from
    `wait4`, not the largest of every child so far). Exits with the tail of its output
    when it fails; a child left behind by an interrupt is killed."""
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped: Popen must not wait
        if proc.returncode:
            log.seek(0)
            tail = log.read()[-3000:].decode(errors="replace")
            sys.exit(f"error: {' '.join(cmd[2:4])} exited with {proc.returncode}:\n{tail}")
    return usage.ru_maxrss * 1024  # KiB on Linux


def host_gather_profile(annotations: str, config: str, rows: int, repeats: int) -> None:
    """Prints the median time of the host gather of `rows` feature rows and of their copy
    to the device, for the train features of `config` on `annotations`."""
    import importlib.util
    import statistics
    import time

    import jax
    import numpy as np

    from jaxsvr.inputs import model_inputs
    from jaxsvr.runtime import parallel
    from jaxsvr.train import pipeline

    path, _, arg = config.partition(":")
    spec = importlib.util.spec_from_file_location("config", ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    c = module.get_config(arg or None)
    c.data.annotations = annotations
    video = pipeline.load_splits(c.data).train.video  # [N, D] float32
    mesh = parallel.make_mesh()
    rng = np.random.default_rng(0)
    gather, copy = [], []
    for _ in range(repeats + 1):  # the first batch warms up
        batch_rows = rng.integers(0, len(video), rows)
        start = time.perf_counter()
        host = model_inputs.gather_rows(video, batch_rows)
        mid = time.perf_counter()
        jax.block_until_ready(parallel.global_batch({"video": host}, mesh))
        gather.append(mid - start)
        copy.append(time.perf_counter() - mid)
    print(
        f"{config}: {rows} rows x {video.shape[-1]} float32 = {host.nbytes / 1e6:.0f} MB per "
        f"batch of {len(video)} train clips; median of {repeats}: gather "
        f"{1e3 * statistics.median(gather[1:]):.1f} ms, host-to-device copy "
        f"{1e3 * statistics.median(copy[1:]):.1f} ms ({jax.devices()[0].platform})"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--annotations", default=str(ROOT.parent / "shared/data/epic100"))
    p.add_argument("--epochs", type=cli.number(int, 1), default=1)
    p.add_argument("--config", default="configs/epic_jpose.py")
    p.add_argument("--gather", nargs="+", default=["device", "host"], choices=["device", "host"])
    p.add_argument(
        "--max-steps",
        type=cli.number(int, 0),
        default=0,
        help="stop after this many steps (0: whole epochs)",
    )
    p.add_argument(
        "--log-every",
        type=cli.number(int, 1),
        default=25,
        help="steps per rate sample (3+ samples needed)",
    )
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    p.add_argument(
        "--host-gather-profile",
        action="store_true",
        help="time the host gather of one batch and its device copy instead of training",
    )
    p.add_argument(
        "--rows", type=cli.number(int, 1), default=64 * 61, help="rows per batch (profile)"
    )
    p.add_argument("--repeats", type=cli.number(int, 1), default=20, help="batches timed (profile)")
    args = p.parse_args()
    if args.host_gather_profile:
        host_gather_profile(args.annotations, args.config, args.rows, args.repeats)
        return
    extra = ["--config.eval.every_epochs=1000", *(f"--config.{kv}" for kv in args.set)]
    if args.max_steps:
        extra.append(f"--config.train.max_steps={args.max_steps}")
    print(" ".join([args.config, *args.set]))
    print("| gather | steps/s | ms/step | host wait | peak RSS |")
    print("|---|---|---|---|---|")
    for gather in args.gather:
        flags = [f"--config.train.gather={gather}", *extra]
        m = measure(args.annotations, args.epochs, flags, args.config, args.log_every)
        print(
            f"| {gather} | {m['steps_per_sec']:.2f} | {1000 / m['steps_per_sec']:.0f} | "
            f"{100 * m['host_wait']:.1f}% | {m['peak_rss_gb']:.2f} GB |",
            flush=True,
        )


if __name__ == "__main__":
    main()
