"""JPoSE train step at the published batch: jaxsvr's jitted step against the public
PyTorch step pattern, measured back to back in one run, with a profile of the JAX step.

  python benchmarks/jpose_step_speed.py [--torch-python PY] [--repeats 3] [--steps 10]
      [--annotations ../shared/data/epic100] [--json out.json]
      [--matmul-precision bfloat16]

Published batch: 64 anchors x 10 triplets x 3 levels (verb, noun, action), 3072-d clip
features (the EPIC-100 train split with synthetic features when ../shared/data/epic100
is there, else the built-in data), SGD with momentum.

- `jax`: `jaxsvr.train.loop.train_step` jitted as the trainer jits it (device-resident
  features, the step gathers rows), timed per step after compilation; its FLOPs from
  XLA's cost analysis. Each anchor's rows are gathered and embedded per row group, once,
  and only through the branches that group feeds (`jaxsvr.objectives.triplet`).
- `torch`: `benchmarks/jpose_step_torch.py` in its own process: the step pattern of the
  public JPoSE training loop (12 forward graphs and backward passes per step) on random
  data of the same shapes, PyTorch 2.13.0 on the CPU. `--torch-python` names an
  interpreter with torch (`pip install -e ".[torch-reference]"`, or a separate venv).
- `floor`: XLA's own float32 matrix product at the step's dense shape ([1280, 3072] x
  [3072, 256] and its kernel gradient): the rate the dense layers over the 3072-d video
  rows cannot beat; the step's video dense FLOPs at that rate are its floor (in float32:
  under `--matmul-precision bfloat16` the step can go below it).
- `profile` (once): a JAX profiler trace of a few steps, each XLA op's time summed into
  matrix products, gathers and the rest (elementwise, reductions, pads).

Both frameworks use 2 threads (the CPU's cores here; XLA uses every core). Each repetition
runs jax, then torch, in fresh processes; the speed-up is per repetition. Prints the CPU
model, a markdown table and one JSON object.
"""

from __future__ import annotations

import argparse
import time

import step_comparison as harness  # beside this script

DENSE_ROWS, VIDEO_DIM, EMBED = 1280, 3072, 256
CONFIG = "configs/epic_jpose.py"


def jax_child(args: argparse.Namespace) -> dict:
    step = harness.build(CONFIG, harness.annotations_dir(args), harness.overrides(args))
    out, batches = harness.measure(step, args.steps, args.warmup)
    if args.profile:
        out["profile"] = harness.profile(step, batches)
    return out


def floor_child(args: argparse.Namespace, repeats: int = 30) -> dict:
    """XLA's best float32 GFLOP/s at the step's dense shape, forward and kernel gradient
    (the fastest of `repeats` runs: a floor is what the step cannot beat)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.random((DENSE_ROWS, VIDEO_DIM), dtype=np.float32))
    w = jnp.asarray(rng.random((VIDEO_DIM, EMBED), dtype=np.float32))
    g = jnp.asarray(rng.random((DENSE_ROWS, EMBED), dtype=np.float32))
    rates = {}
    for name, fn, args in (
        ("forward", jax.jit(lambda x, w: x @ w), (x, w)),
        ("kernel_gradient", jax.jit(lambda x, g: x.T @ g), (x, g)),
    ):
        jax.block_until_ready(fn(*args))
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times.append(time.perf_counter() - start)
        rates[name] = 2 * DENSE_ROWS * VIDEO_DIM * EMBED / min(times) / 1e9
    return {"gflops": rates}


def video_dense_gflop() -> float:
    """FLOPs of the video rows' first dense layer per step (forward + kernel gradient):
    anchors through both branches, each level's 2K rows through its own (action: both)."""
    anchors, k = 64, 10
    row_branches = anchors * 2 + 2 * k * anchors * (1 + 1 + 2)
    return 2 * 2 * row_branches * VIDEO_DIM * EMBED / 1e9


def table(report: dict) -> str:
    span = harness.span
    jax_times = harness.jax_ms(report)
    torch_ms = [r["median_ms"] for r in report["torch"]]
    gflop = report["jax"][0]["gflop_per_step"]
    floor = report["floor"]["gflops"]
    # half the video dense FLOPs are forward products, half kernel gradients
    floor_ms = sum(video_dense_gflop() / 2 / rate for rate in floor.values()) * 1e3
    floor_rate = video_dense_gflop() / floor_ms * 1e3
    floor_name = "its float32 floor" if report.get("matmul_precision") else "its floor"
    rows = [
        "| JPoSE step, published batch (2 threads) | ms/step | GFLOP/step | GFLOP/s |",
        "|---|---|---|---|",
        f"| jaxsvr (`train_step`, jitted) | {span(jax_times)} | {gflop:.1f} | "
        f"{span([gflop / t * 1e3 for t in jax_times])} |",
        f"| public PyTorch pattern (torch {report['torch'][0]['version']}) | "
        f"{span(torch_ms)} | {report['torch'][0]['gflop_per_step']:.1f} | "
        f"{span([r['gflop_per_step'] / r['median_ms'] * 1e3 for r in report['torch']])} |",
        f"| floor: video dense layers at XLA's best float32 matmul rates (forward "
        f"{floor['forward']:.0f}, kernel gradient {floor['kernel_gradient']:.0f} GFLOP/s) | "
        f"{floor_ms:.0f} | {video_dense_gflop():.1f} | {floor_rate:.0f} |",
        "",
        f"Speed-up over the PyTorch pattern: {span(report['speedup'], '{:.2f}')}× (per "
        f"repetition); jaxsvr's step is {span([t / floor_ms for t in jax_times], '{:.2f}')}× "
        f"{floor_name}.",
    ]
    return "\n".join(rows + harness.profile_rows(report))


def main() -> None:
    harness.main(
        harness.parser(__doc__).parse_args(),
        {"jax": jax_child, "floor": floor_child},
        script=__file__,
        torch_script="jpose_step_torch.py",
        table=table,
        first=("--profile",),
        once={"floor": ["--child", "floor"]},
    )


if __name__ == "__main__":
    main()
