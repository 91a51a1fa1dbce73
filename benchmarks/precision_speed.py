"""Each model's jitted train step at float32 and under `matmul_precision=bfloat16` (mixed
precision: jaxsvr's Dense products on bfloat16 inputs, float32 sums; docs/training.md
#precision), in alternating fresh processes on the same machine.

  python benchmarks/precision_speed.py [--configs configs/epic_jpose.py ...] [--rounds 2]
      [--precisions default bfloat16] [--one-process] [--annotations ../shared/data/epic100]
      [--json out.json]

"default" is JAX's own precision: float32 on a CPU, TensorFloat-32 on recent NVIDIA GPUs
("bfloat16": the Dense layers' products of bfloat16 inputs on both). Each round runs,
for each config, one process per precision (`step_comparison.build`: the step as the
trainer jits it, in a process set up as `python -m jaxsvr.main` sets up its own) and
times its steps after compilation (`--steps` per config: the default fits each model's
step length). Prints the CPU model, a markdown table of the median ms per step (min–max
over the rounds), the speed-up of the last precision over the first, the last logged
loss of each, and one JSON object.

`--one-process`: each config's precisions are built and compiled in one process and
timed there in alternating rounds (the same batches for each): short steps, such as a
GPU's few milliseconds, then compare under the same conditions rather than across
processes (the H100 figures of docs/training.md#precision).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import step_comparison as harness  # beside this script

from jaxsvr.runtime import cli, precision

STEPS = {  # timed steps per process: tens of seconds each on 2 cores
    "configs/epic_jpose.py": 20,
    "configs/epic_mme.py": 20,
    "configs/epic_hgr.py": 10,
    "configs/epic_contra.py": 4,
    "configs/epic_sms.py": 40,
}


def jax_child(args: argparse.Namespace) -> dict:
    step = harness.build(
        args.configs[0], harness.annotations_dir(args), {"matmul_precision": args.precisions[0]}
    )
    out, _ = harness.measure(step, args.steps, args.warmup)
    return out


def jax_all_child(args: argparse.Namespace) -> dict:
    """Every precision of the config in this process: {precision: [one run per round]}."""
    import jax
    import numpy as np

    device = jax.devices()[0]
    annotations = harness.annotations_dir(args)
    steps = {
        p: harness.build(args.configs[0], annotations, {"matmul_precision": p})
        for p in args.precisions
    }
    batches = harness.global_batches(steps[args.precisions[0]], args.warmup + args.steps)
    runs: dict = {p: [] for p in args.precisions}
    for step in steps.values():  # compilation and warm-up
        harness.run_steps(step, batches[: max(args.warmup, 1)])
    for _ in range(args.rounds):
        for p, step in steps.items():
            times, metrics = harness.run_steps(step, batches[args.warmup :])
            loss = float(np.asarray(metrics["loss"]))
            runs[p].append(
                {
                    "ms_per_step": [t * 1e3 for t in times],
                    "loss": loss,
                    "device": f"{device.platform} ({device.device_kind})",
                }
            )
    return runs


def table(report: dict) -> str:
    span = harness.span
    names = report["precisions"]
    rows = [
        "| config | "
        + " | ".join(f"{p} ms/step" for p in names)
        + " | speed-up | last loss ("
        + " / ".join(names)
        + ") |",
        "|---" * (len(names) + 3) + "|",
    ]
    for config, runs in report["runs"].items():
        ms = {p: [statistics.median(r["ms_per_step"]) for r in runs[p]] for p in names}
        speedup = [a / b for a, b in zip(ms[names[0]], ms[names[-1]], strict=True)]
        loss = " / ".join(f"{runs[p][-1]['loss']:.5f}" for p in names)
        rows.append(
            f"| {config} | "
            + " | ".join(span(ms[p], "{:.1f}") for p in names)
            + f" | {span(speedup, '{:.2f}')}× | {loss} |"
        )
    return "\n".join(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", nargs="+", default=list(STEPS))
    p.add_argument(
        "--precisions", nargs="+", choices=precision.PRECISIONS, default=["default", "bfloat16"]
    )
    p.add_argument("--rounds", type=cli.number(int, 1), default=2)
    p.add_argument(
        "--steps", type=cli.number(int, 1), help="timed steps per process (default: per config)"
    )
    p.add_argument("--warmup", type=cli.number(int, 0), default=2)
    p.add_argument("--annotations", type=Path, default=harness.DEFAULT_EPIC)
    p.add_argument(
        "--one-process", action="store_true", help="all precisions of a config in one process"
    )
    p.add_argument("--json", type=Path, help="also write the JSON report here")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child is not None:
        harness.main(args, {"jax": jax_child, "jax_all": jax_all_child})
        return
    sys.path.insert(0, str(harness.ROOT / "benchmarks"))
    from evaluation_speed import cpu_model, emit  # beside this script

    found = harness.annotations_dir(args)
    report: dict = {"cpu": cpu_model(), "precisions": args.precisions, "runs": {}}
    print(report["cpu"], file=sys.stderr)

    def child(kind: str, config: str, names: list[str]) -> dict:
        opts = ["--child", kind, "--configs", config, "--precisions", *names]
        opts += ["--steps", str(args.steps or STEPS.get(config, 10))]
        opts += ["--rounds", str(args.rounds), "--warmup", str(args.warmup)]
        if found is not None:
            opts += ["--annotations", str(found)]
        return harness.run_child(__file__, opts)

    if args.one_process:
        for config in args.configs:
            report["runs"][config] = runs = child("jax_all", config, args.precisions)
            for name in args.precisions:
                ms = [statistics.median(run["ms_per_step"]) for run in runs[name]]
                print(f"{config} {name}: {' '.join(f'{m:.2f}' for m in ms)} ms", file=sys.stderr)
    else:
        for r in range(args.rounds):
            for config in args.configs:
                for name in args.precisions:
                    run = child("jax", config, [name])
                    report["runs"].setdefault(config, {}).setdefault(name, []).append(run)
                    ms = statistics.median(run["ms_per_step"])
                    print(f"round {r + 1}: {config} {name} {ms:.1f} ms", file=sys.stderr)
    where = "in one process per config" if args.one_process else "of alternating fresh processes"
    header = f"{report['cpu']}; {args.rounds} rounds {where} (min–max)"
    emit(report, table(report), header, args.json)


if __name__ == "__main__":
    main()
