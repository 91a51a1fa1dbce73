"""JPoSE train step at the published batch: jaxsvr's jitted step against the public
PyTorch step pattern, measured back to back in one run, with a profile of the JAX step.

  python benchmarks/jpose_step_speed.py [--torch-python PY] [--repeats 3] [--steps 10]
      [--annotations ../shared/data/epic100] [--json out.json]

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
  rows cannot beat; the step's video dense FLOPs at that rate are its floor.
- `profile` (once): a JAX profiler trace of a few steps, each XLA op's time summed into
  matrix products, gathers and the rest (elementwise, reductions, pads).

Both frameworks use 2 threads (the CPU's cores here; XLA uses every core). Each repetition
runs jax, then torch, in fresh processes; the speed-up is per repetition. Prints the CPU
model, a markdown table and one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jaxsvr.runtime import cli

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_EPIC = ROOT.parent / "shared" / "data" / "epic100"
DENSE_ROWS, VIDEO_DIM, EMBED = 1280, 3072, 256


def _build(annotations: Path | None):
    """(jitted step, state, tables, batches, config) of configs/epic_jpose.py."""
    import functools

    import jax

    from jaxsvr import configs
    from jaxsvr.runtime import parallel
    from jaxsvr.train import batches, loop, optim, pipeline

    config = configs.from_file(str(ROOT / "configs" / "epic_jpose.py"))
    if annotations is not None:
        config.data.annotations = str(annotations)
    run = pipeline.build(config)
    mesh = parallel.make_mesh(config.mesh.data)
    rep = parallel.replicated(mesh)
    batch_size = config.train.batch_size
    steps_per_epoch = run.objective.steps_per_epoch(batch_size)
    tx = optim.build(config.optimizer, config.train.num_epochs * steps_per_epoch)
    state = loop.init_state(config, run.model, tx, run, rep)
    tables = run.train_inputs.device_tables(rep)
    source = batches.BatchSource(
        run.objective, run.train_inputs, batch_size, steps_per_epoch, "device"
    )
    step = jax.jit(
        functools.partial(
            loop.train_step,
            model=run.model,
            tx=tx,
            objective=run.objective,
            seed=config.seed,
        ),
        donate_argnums=0,
    )
    return step, state, tables, source, mesh


def jax_child(annotations: Path | None, steps: int, warmup: int, profile: bool) -> dict:
    import jax
    import numpy as np

    from jaxsvr.runtime import parallel

    step, state, tables, source, mesh = _build(annotations)
    batches = [parallel.global_batch(source(i + 1), mesh) for i in range(warmup + steps)]
    compiled = step.lower(state, tables, batches[0]).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    times = []
    for i, batch in enumerate(batches):
        start = time.perf_counter()
        state, metrics = step(state, tables, batch)
        jax.block_until_ready(metrics)
        if i >= warmup:
            times.append(time.perf_counter() - start)
    out = {
        "ms_per_step": [t * 1e3 for t in times],
        "gflop_per_step": float(cost.get("flops", 0.0)) / 1e9,
        "device": f"{jax.devices()[0].platform} ({jax.devices()[0].device_kind})",
        "loss": float(np.asarray(metrics["loss"])),
    }
    if profile:
        out["profile"] = _profile(step, state, tables, batches[warmup:])
    return out


def _profile(step, state, tables, batches) -> dict:
    """ms per step of XLA's ops by kind, from a perfetto trace of `batches`."""
    import gzip

    import jax

    with tempfile.TemporaryDirectory() as logdir:
        with jax.profiler.trace(logdir, create_perfetto_trace=True):
            for batch in batches:
                state, metrics = step(state, tables, batch)
                jax.block_until_ready(metrics)
        trace = next(Path(logdir).rglob("perfetto_trace.json.gz"))
        events = json.load(gzip.open(trace))
    events = events["traceEvents"] if isinstance(events, dict) else events
    kinds = {"matrix products": 0.0, "gathers": 0.0, "other ops": 0.0}
    for e in events:
        name = e.get("name", "")
        if e.get("ph") != "X" or "dur" not in e or _wrapper(name):
            continue
        kind = "other ops"
        if name.startswith(("ynn_fusion", "dot", "convolution")) or "dot_fusion" in name:
            kind = "matrix products"
        elif "gather" in name:
            kind = "gathers"
        kinds[kind] += e["dur"] / 1e3 / len(batches)
    return kinds


def _wrapper(name: str) -> bool:
    """Trace events that enclose ops (the executor, Python frames) rather than being one."""
    return name.startswith(("ThunkExecutor", "$", "PjitFunction", "SlinkyThreadPool"))


def floor_child(repeats: int = 30) -> dict:
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


def _run_child(args: list[str]) -> dict:
    r = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, cwd=ROOT, timeout=1800
    )
    if r.returncode:
        sys.exit(f"error: benchmark child {args} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _run_torch(python: str, steps: int, warmup: int) -> dict:
    script = ROOT / "benchmarks" / "jpose_step_torch.py"
    cmd = [python, str(script), "--threads", "2", "--steps", str(steps), "--warmup", str(warmup)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=1800)
    if r.returncode:
        sys.exit(f"error: the PyTorch reference failed ({python}):\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _span(values: list[float], fmt: str = "{:.0f}") -> str:
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def table(report: dict) -> str:
    jax_ms = [statistics.median(r["ms_per_step"]) for r in report["jax"]]
    torch_ms = [r["median_ms"] for r in report["torch"]]
    gflop = report["jax"][0]["gflop_per_step"]
    floor = report["floor"]["gflops"]
    # half the video dense FLOPs are forward products, half kernel gradients
    floor_ms = sum(video_dense_gflop() / 2 / rate for rate in floor.values()) * 1e3
    floor_rate = video_dense_gflop() / floor_ms * 1e3
    rows = [
        "| JPoSE step, published batch (2 threads) | ms/step | GFLOP/step | GFLOP/s |",
        "|---|---|---|---|",
        f"| jaxsvr (`train_step`, jitted) | {_span(jax_ms)} | {gflop:.1f} | "
        f"{_span([gflop / t * 1e3 for t in jax_ms])} |",
        f"| public PyTorch pattern (torch {report['torch'][0]['version']}) | "
        f"{_span(torch_ms)} | {report['torch'][0]['gflop_per_step']:.1f} | "
        f"{_span([r['gflop_per_step'] / r['median_ms'] * 1e3 for r in report['torch']])} |",
        f"| floor: video dense layers at XLA's best matmul rates (forward "
        f"{floor['forward']:.0f}, kernel gradient {floor['kernel_gradient']:.0f} GFLOP/s) | "
        f"{floor_ms:.0f} | {video_dense_gflop():.1f} | {floor_rate:.0f} |",
        "",
        f"Speed-up over the PyTorch pattern: {_span(report['speedup'], '{:.2f}')}× (per "
        f"repetition); jaxsvr's step is {_span([t / floor_ms for t in jax_ms], '{:.2f}')}× "
        "its floor.",
    ]
    if "profile" in report["jax"][0]:
        prof = report["jax"][0]["profile"]
        rows.append(
            "Where the JAX step's time goes (XLA ops, ms/step): "
            + ", ".join(f"{k} {v:.0f}" for k, v in prof.items())
        )
    return "\n".join(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--annotations", type=Path, default=DEFAULT_EPIC)
    p.add_argument("--torch-python", default=sys.executable, help="interpreter with torch")
    p.add_argument(
        "--repeats", type=cli.number(int, 1), default=3, help="fresh processes per framework"
    )
    p.add_argument("--steps", type=cli.number(int, 1), default=10, help="timed steps per process")
    p.add_argument("--warmup", type=cli.number(int, 0), default=3)
    p.add_argument("--json", type=Path, help="also write the JSON report here")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    annotations = (
        args.annotations if (args.annotations / "EPIC_100_retrieval_test.csv").is_file() else None
    )
    if args.child == "jax":
        print(json.dumps(jax_child(annotations, args.steps, args.warmup, args.profile)))
        return
    if args.child == "floor":
        print(json.dumps(floor_child()))
        return
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from evaluation_speed import cpu_model, emit  # beside this script

    report: dict = {"cpu": cpu_model(), "annotations": str(annotations), "jax": [], "torch": []}
    print(report["cpu"], file=sys.stderr)
    report["floor"] = _run_child(["--child", "floor"])
    common = ["--steps", str(args.steps), "--warmup", str(args.warmup)]
    if annotations is not None:
        common += ["--annotations", str(annotations)]
    for rep in range(args.repeats):
        extra = ["--profile"] if rep == 0 else []
        report["jax"].append(_run_child(["--child", "jax", *common, *extra]))
        report["torch"].append(_run_torch(args.torch_python, args.steps, args.warmup))
        print(
            f"repeat {rep + 1}/{args.repeats}: jax "
            f"{statistics.median(report['jax'][-1]['ms_per_step']):.0f} ms, torch "
            f"{report['torch'][-1]['median_ms']:.0f} ms",
            file=sys.stderr,
        )
    report["speedup"] = [
        t["median_ms"] / statistics.median(j["ms_per_step"])
        for j, t in zip(report["jax"], report["torch"])
    ]
    header = f"{report['cpu']}; {args.repeats} fresh processes per framework (min–max)"
    emit(report, table(report), header, args.json)


if __name__ == "__main__":
    main()
