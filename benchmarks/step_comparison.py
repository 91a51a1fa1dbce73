"""The harness of the train-step comparisons (`benchmarks/*_step_speed.py`): jaxsvr's
jitted train step of one config against a PyTorch reference script (`*_step_torch.py`,
whose shared shell is `benchmarks/torch_reference.py`) on the same CPU, side by side in
one run.

A comparison script keeps what is its own (its config, the numbers its JAX child adds,
the PyTorch script's arguments, its table) and hands the rest to this module:

- `parser(doc)`: the common command line (`--annotations`, `--torch-python`, `--repeats`,
  `--steps`, `--warmup`, `--json`, `--matmul-precision`: jaxsvr's
  `config.matmul_precision`, e.g. bfloat16 for its mixed precision, which the JAX child
  gets through `overrides(args)`; and the hidden `--child`, `--parts`, `--profile`);
- `build(config)`: the config's train step jitted as the trainer jits it (device-resident
  features, the step gathers rows, the state donated) in a process set up as
  `python -m jaxsvr.main` sets up its own (threefry unrolled on the CPU; the JAX child
  starts with the same glibc huge-page tunable, `process_tuning.huge_page_environment`;
  the PyTorch child keeps the environment as given, as the public code sets nothing:
  `GLIBC_TUNABLES=glibc.malloc.hugetlb=1` for the whole run gives it to both),
  with its state, tables and batch source; `measure(step, ...)`: its ms per timed step
  after compilation, XLA's FLOPs, the loss; `parts(...)`: the step's parts each jitted
  alone; `profile(...)`: XLA's ops of a few steps by kind, from a profiler trace;
- `main(args, children, ...)`: in a child process (`--child NAME`) prints what
  `children[NAME]` measures; otherwise `compare`: each repetition runs the JAX child (the
  script itself, `--child jax`), then the PyTorch script, each in a fresh process with 2
  threads; the speed-up is per repetition; prints the CPU model, the script's markdown
  table (`parts_rows` for the parts of both steps) and one JSON object.

Torch and JAX never share a process, and jaxsvr never imports torch: the PyTorch script
runs under `--torch-python` (an interpreter with `pip install -e ".[torch-reference]"`, or
a separate venv).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jaxsvr.runtime import cli, precision, process_tuning

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_EPIC = ROOT.parent / "shared" / "data" / "epic100"
THREADS = 2  # the CPU's cores here; XLA uses every core, PyTorch is told


@dataclass
class Step:
    """A config's jitted train step and what it runs on; `state` is replaced by each call
    that runs the step (the jitted step donates it)."""

    fn: Callable  # (state, tables, batch) -> (state, metrics)
    state: Any
    tables: dict
    source: Any  # jaxsvr.train.batches.BatchSource: step number -> host batch
    mesh: Any
    run: Any  # jaxsvr.train.pipeline's run: model, objective, inputs
    config: Any


def parser(doc: str) -> argparse.ArgumentParser:
    """The comparison scripts' common options; a script adds its own."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--annotations", type=Path, default=DEFAULT_EPIC)
    p.add_argument("--torch-python", default=sys.executable, help="interpreter with torch")
    p.add_argument(
        "--repeats", type=cli.number(int, 1), default=3, help="fresh processes per framework"
    )
    p.add_argument("--steps", type=cli.number(int, 1), default=10, help="timed steps per process")
    p.add_argument("--warmup", type=cli.number(int, 0), default=3)
    p.add_argument("--json", type=Path, help="also write the JSON report here")
    p.add_argument(
        "--matmul-precision",
        choices=precision.PRECISIONS,
        help="jaxsvr's config.matmul_precision (default: the config's)",
    )
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--parts", action="store_true", help=argparse.SUPPRESS)  # `parts`
    p.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)  # `profile`
    return p


def overrides(args: argparse.Namespace) -> dict:
    """The config keys the common options set (`--matmul-precision`), for `build`."""
    if args.matmul_precision is None:
        return {}
    return {"matmul_precision": args.matmul_precision}


def annotations_dir(args: argparse.Namespace) -> Path | None:
    """`--annotations` when it holds the EPIC-100 CSVs, else None (the built-in data)."""
    found = (args.annotations / "EPIC_100_retrieval_test.csv").is_file()
    return args.annotations if found else None


def build(config_file: str, annotations: Path | None, overrides: dict | None = None) -> Step:
    """The train step of `config_file` (relative to the repository, variants after `:`),
    jitted as `jaxsvr.train.loop` jits it; `overrides` are dotted config keys."""
    import jax

    from jaxsvr import configs
    from jaxsvr.runtime import parallel, threefry
    from jaxsvr.train import batches, loop, optim, pipeline

    threefry.lower_unrolled_on_cpu()  # as jaxsvr.main does before its job
    config = configs.from_file(str(ROOT / config_file))
    if annotations is not None:
        config.data.annotations = str(annotations)
    for key, value in (overrides or {}).items():
        *path, last = key.split(".")
        functools.reduce(getattr, path, config)[last] = value
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
    fn = jax.jit(
        scoped(
            config,
            functools.partial(
                loop.train_step,
                model=run.model,
                tx=tx,
                objective=run.objective,
                seed=config.seed,
            ),
        ),
        donate_argnums=0,
    )
    return Step(fn, state, tables, source, mesh, run, config)


def scoped(config, fn: Callable) -> Callable:
    """`fn` traced under `config.matmul_precision`, as `jaxsvr.train.loop` traces the step
    (`jaxsvr.runtime.precision.scope`)."""
    from jaxsvr.runtime import precision

    return precision.traced_under(config.matmul_precision, fn)


def global_batches(step: Step, count: int) -> list:
    """The device batches of steps 1..count."""
    from jaxsvr.runtime import parallel

    return [parallel.global_batch(step.source(i + 1), step.mesh) for i in range(count)]


def run_steps(step: Step, batches: list) -> tuple[list[float], Any]:
    """Seconds of each step over `batches` (blocking on its metrics) and the last metrics."""
    import jax

    times, metrics = [], None
    for batch in batches:
        start = time.perf_counter()
        step.state, metrics = step.fn(step.state, step.tables, batch)
        jax.block_until_ready(metrics)
        times.append(time.perf_counter() - start)
    return times, metrics


def measure(step: Step, steps: int, warmup: int) -> tuple[dict, list]:
    """The JAX child's common report, and the timed steps' batches (for parts, profiles):
    ms of each of `steps` timed steps after `warmup` untimed ones (compilation first),
    XLA's GFLOP per step, the device, the last loss."""
    import jax
    import numpy as np

    batches = global_batches(step, warmup + steps)
    compiled = step.fn.lower(step.state, step.tables, batches[0]).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    times, metrics = run_steps(step, batches)
    device = jax.devices()[0]
    report = {
        "ms_per_step": [t * 1e3 for t in times[warmup:]],
        "gflop_per_step": float(cost.get("flops", 0.0)) / 1e9,
        "device": f"{device.platform} ({device.device_kind})",
        "loss": float(np.asarray(metrics["loss"])),
    }
    return report, batches[warmup:]


def _median_ms(fn: Callable, args: tuple, calls: int) -> float:
    import jax

    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def parts(step: Step, batches: list, extra: dict | None = None) -> dict:
    """Median ms of the step's parts, each jitted alone and called once per timed batch:
    the row gather, the video and text encoders, scores + loss (batch objectives), the whole
    forward, forward + backward and the whole step; backward = (forward + backward) -
    forward, optimiser = step - (forward + backward) - gather. `extra`: name -> function of
    (params, gathered inputs), timed the same way."""
    import jax

    from jaxsvr.train import loop

    model, objective = step.run.model, step.run.objective
    rng = jax.random.fold_in(jax.random.key(step.config.seed), 0)
    video_rng, text_rng = jax.random.split(rng)

    def gather(batch):
        return loop.gather_device(step.tables, objective.gathers, batch)

    def video(params, inputs):
        return model.apply(
            params, inputs, True, method=model.embed_video, rngs={"dropout": video_rng}
        )

    def text(params, inputs):
        return model.apply(
            params, inputs, True, method=model.embed_text, rngs={"dropout": text_rng}
        )

    def forward(params, inputs, batch):
        return objective.loss(model, params, inputs, batch, rng)[0]

    def scoped_jit(fn):
        return jax.jit(scoped(step.config, fn))

    params, batch = step.state.params, batches[0]
    inputs = scoped_jit(gather)(batch)
    calls = {
        "gather": (scoped_jit(gather), (batch,)),
        "video": (scoped_jit(video), (params, inputs)),
        "text": (scoped_jit(text), (params, inputs)),
    }
    for name, fn in (extra or {}).items():
        calls[name] = (scoped_jit(fn), (params, inputs))
    if hasattr(objective, "fn"):  # a batch objective: its loss of the [B, B] scores alone

        def scores_loss(params, v, t, batch):
            sims = model.apply(params, v, t, method=model.similarity)
            return sum(
                objective.weights[lv]
                * objective.fn(sims[lv], batch["rel"][:, i, :], **objective.kwargs)
                for i, lv in enumerate(objective.levels)
            )

        v, t = calls["video"][0](params, inputs), calls["text"][0](params, inputs)
        calls["scores_loss"] = (scoped_jit(scores_loss), (params, v, t, batch))
    calls["forward"] = (scoped_jit(forward), (params, inputs, batch))
    calls["forward_backward"] = (
        scoped_jit(jax.value_and_grad(forward)),
        (params, inputs, batch),
    )
    ms = {name: _median_ms(fn, args, len(batches)) for name, (fn, args) in calls.items()}
    ms["step"] = statistics.median(run_steps(step, batches)[0]) * 1e3
    ms["backward"] = ms["forward_backward"] - ms["forward"]
    ms["optimiser"] = ms["step"] - ms["forward_backward"] - ms["gather"]
    return ms


def profile(step: Step, batches: list) -> dict:
    """ms per step of XLA's ops by kind (matrix products, gathers, the rest), from a
    perfetto trace of the steps over `batches`."""
    import gzip

    import jax

    with tempfile.TemporaryDirectory() as logdir:
        with jax.profiler.trace(logdir, create_perfetto_trace=True):
            run_steps(step, batches)
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


def run_child(script: str, args: list[str]) -> dict:
    """The last stdout line (JSON) of `script` run with this interpreter."""
    env = process_tuning.huge_page_environment(os.environ)  # as jaxsvr.main restarts with
    r = subprocess.run(
        [sys.executable, script, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1800,
        env=env,
    )
    if r.returncode:
        sys.exit(f"error: benchmark child {args} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_torch(python: str, script: str, args: list[str], timeout: int = 3600) -> dict:
    """The last stdout line (JSON) of the PyTorch script `benchmarks/<script>` on
    `THREADS` threads."""
    cmd = [python, str(ROOT / "benchmarks" / script), "--threads", str(THREADS), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    if r.returncode:
        sys.exit(f"error: the PyTorch reference failed ({python}):\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def span(values: list[float], fmt: str = "{:.0f}") -> str:
    """'lo–hi' of `values` as `fmt` prints them ('lo' when the two print the same)."""
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def jax_ms(report: dict) -> list[float]:
    """The median ms per step of each repetition's JAX child."""
    return [statistics.median(r["ms_per_step"]) for r in report["jax"]]


def compare(
    args: argparse.Namespace,
    *,
    script: str,
    torch_script: str,
    table: Callable[[dict], str],
    first: tuple[str, ...] = (),
    jax_args: tuple[str, ...] = (),
    torch_args: Callable[[dict], list[str]] = lambda jax_run: [],
    once: dict[str, list[str]] | None = None,
) -> None:
    """Runs the comparison and prints (and with `--json` writes) its report.

    Args:
      args: the parsed `parser` options.
      script: the comparison script (its JAX child is `script --child jax ...`).
      torch_script: the PyTorch script's file name in benchmarks/.
      table: the report -> the markdown the script prints.
      first: extra JAX child options of the first repetition only (parts, profiles).
      jax_args: extra JAX child options of every repetition.
      torch_args: a repetition's JAX report -> the PyTorch script's extra options.
      once: report key -> child options of a child run once before the repetitions.
    """
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from evaluation_speed import cpu_model, emit  # beside this module

    found = annotations_dir(args)
    report: dict = {"cpu": cpu_model(), "annotations": str(found), "jax": [], "torch": []}
    report["matmul_precision"] = args.matmul_precision  # None: the config's
    print(report["cpu"], file=sys.stderr)
    for key, child in (once or {}).items():
        report[key] = run_child(script, child)
    common = ["--steps", str(args.steps), "--warmup", str(args.warmup), *jax_args]
    if args.matmul_precision is not None:
        common += ["--matmul-precision", args.matmul_precision]
    if found is not None:
        common += ["--annotations", str(found)]
    for rep in range(args.repeats):
        extra = list(first) if rep == 0 else []
        report["jax"].append(run_child(script, ["--child", "jax", *common, *extra]))
        steps = ["--steps", str(args.steps), "--warmup", str(args.warmup)]
        report["torch"].append(
            run_torch(args.torch_python, torch_script, steps + torch_args(report["jax"][-1]))
        )
        print(
            f"repeat {rep + 1}/{args.repeats}: jax {jax_ms(report)[-1]:.0f} ms, torch "
            f"{report['torch'][-1]['median_ms']:.0f} ms",
            file=sys.stderr,
        )
    report["speedup"] = [
        t["median_ms"] / j for j, t in zip(jax_ms(report), report["torch"], strict=True)
    ]
    header = f"{report['cpu']}; {args.repeats} fresh processes per framework (min–max)"
    if args.matmul_precision is not None:
        header += f"; jaxsvr's matmul_precision {args.matmul_precision}"
    emit(report, table(report), header, args.json)


def profile_rows(report: dict) -> list[str]:
    """The table line of the first repetition's XLA profile (`profile`), if measured."""
    prof = report["jax"][0].get("profile")
    if prof is None:
        return []
    return [
        "Where the JAX step's time goes (XLA ops, ms/step): "
        + ", ".join(f"{k} {v:.0f}" for k, v in prof.items())
    ]


def parts_rows(report: dict, names: tuple[str, ...], fmt: str = "{:.0f}") -> list[str]:
    """Table lines of the parts of the first repetition's steps: the JAX parts `names`
    (when measured), then every PyTorch part."""
    first = report["jax"][0]
    rows = []
    if "parts_ms" in first:
        rows.append(
            "Parts of the JAX step (ms, each jitted alone): "
            + ", ".join(f"{k} {fmt.format(first['parts_ms'][k])}" for k in names)
        )
    torch_parts = report["torch"][0]["parts_ms"]
    rows.append(
        "Parts of the PyTorch step (ms, first repetition): "
        + ", ".join(f"{k} {fmt.format(v)}" for k, v in torch_parts.items())
    )
    return rows


def main(
    args: argparse.Namespace,
    children: dict[str, Callable[[argparse.Namespace], dict]],
    **comparison,
) -> None:
    """A comparison script's entry point: in a child process (`--child NAME`) prints
    `children[NAME](args)` as one JSON line; else runs `compare(args, **comparison)`."""
    if args.child is not None:
        print(json.dumps(children[args.child](args)))
        return
    compare(args, **comparison)
