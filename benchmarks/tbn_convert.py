"""What converting a TBN per-segment pickle once saves each run (`jaxsvr.inputs.tbn`).

  python benchmarks/tbn_convert.py [--clips 8000] [--segments 25] [--folder /tmp/tbn_bench]

Writes a pickle in the release's layout (a dict of RGB / Flow / Audio, each
(clips, segments, 1024) float32; the EK-100 train pickle is 67217 clips, about 20 GB),
then times, each step in a fresh process with its peak RSS: unpickling it (what every run
would pay without conversion), converting it (`python -m jaxsvr.features convert`, once),
and a run's read of the converted stores (`find_split_features`, temporal mean and
segments: memory-mapped, checked for finiteness chunk by chunk). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from jaxsvr.runtime import cli

STEPS = {
    "unpickle (every run, unconverted)": "import pickle; d = pickle.load(open('{pkl}', 'rb'))",
    "convert once (python -m jaxsvr.features)": (
        "from jaxsvr import features; features.main(['convert', '{pkl}', '--out', '{out}', "
        "'--allow-pickle'])"
    ),
    "a run reads the mean store": (
        "from jaxsvr.inputs import features; "
        "features.find_split_features('{out}', 'train', rows={n}, temporal='mean')"
    ),
    "a run reads the segment store": (
        "from jaxsvr.inputs import features; "
        "features.find_split_features('{out}', 'train', rows={n}, temporal='segments')"
    ),
}
# VmHWM: this process's own peak (ru_maxrss would carry the forking parent's over exec)
PEAK = "; print(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clips", type=cli.number(int, 1), default=8000)
    p.add_argument("--segments", type=cli.number(int, 1), default=25)
    p.add_argument("--folder", default="/tmp/tbn_bench")
    args = p.parse_args()
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    pkl, out = folder / "train.pkl", folder / "stores"
    rng = np.random.default_rng(0)
    shape = (args.clips, args.segments, 1024)
    blocks = {m: rng.standard_normal(shape, np.float32) for m in ("RGB", "Flow", "Audio")}
    with pkl.open("wb") as f:
        pickle.dump(blocks, f, protocol=4)
    del blocks
    print(
        f"| step ({args.clips} clips x {args.segments} x 3072, pickle "
        f"{pkl.stat().st_size / 1e9:.2f} GB) | seconds | peak RSS (GB) |"
    )
    print("|---|---|---|")
    for name, code in STEPS.items():
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", code.format(pkl=pkl, out=out, n=args.clips) + PEAK],
            capture_output=True,
            text=True,
            check=True,
        )
        seconds = time.perf_counter() - start
        peak = int(done.stdout.split()[-1]) / 1e6  # kB -> GB
        print(f"| {name} | {seconds:.1f} | {peak:.2f} |")


if __name__ == "__main__":
    main()
