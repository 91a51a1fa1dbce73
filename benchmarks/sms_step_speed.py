"""SMS projection-head train step at jaxsvr's EPIC-100 heads config: jaxsvr's jitted step
against the public SMS-Loss PyTorch step pattern, measured side by side in one run, with
the parts of each step timed.

  python benchmarks/sms_step_speed.py [--torch-python PY] [--repeats 3] [--steps 20]
      [--batch 128] [--annotations ../shared/data/epic100] [--json out.json]
      [--matmul-precision bfloat16] [--torch-autocast bf16]

Sizes: `configs/epic_sms.py` (the SMS loss, margin 0.6 and relax 0.1 as the public
`--loss-margin 0.6 --loss-thres 0.1`; MLP heads 1024 -> 256 per modality over frozen
3072-d clip and 512-d caption features; AdamW lr 1e-3; batch 128). The public code
(xqwang14/SMS-Loss, `scripts/dirtrain.py`, `dirtrain.sh`) fine-tunes AVION's encoders
end to end, 64 clips per GPU on 4 GPUs with the features gathered into one 256 x 256
loss; `--batch 256` runs that loss size here.

- `jax`: `jaxsvr.train.loop.train_step` jitted as the trainer jits it (device-resident
  features, the step gathers rows, the batch relevance computed by the host sampler),
  timed per step after compilation; also the host's time per batch (pair sampling and
  the batch's relevance, which the trainer's prefetch thread does beside the step).
  In the first repetition also XLA's ops by kind from a profiler trace
  (`step_comparison.profile`) and the step's parts, each jitted alone
  (`step_comparison.parts`).
- `torch`: `benchmarks/sms_step_torch.py` in its own process: the public step pattern
  (the public loss, its relevance read from a uint8 matrix inside the step) over the same
  heads on random data of the same shapes, with its parts timed inside the step.

Mixed precision (the public run's own setting: `amp.autocast` is on by default):
`--matmul-precision bfloat16` runs jaxsvr's Dense products on bfloat16 inputs with
float32 sums (`jaxsvr.models.dense`), `--torch-autocast bf16` the PyTorch forward and
loss under CPU bfloat16 autocast; each is independent of the other, so a run can set one
side against the other's float32.

Both frameworks use 2 threads; each repetition runs jax, then torch, in fresh processes;
the speed-up is per repetition. Prints the CPU model, a markdown table and one JSON
object.
"""

from __future__ import annotations

import argparse
import statistics
import time

import step_comparison as harness  # beside this script

from jaxsvr.runtime import cli

CONFIG = "configs/epic_sms.py"
JAX_PARTS = ("gather", "video", "text", "scores_loss", "forward", "backward", "optimiser")


def jax_child(args: argparse.Namespace) -> dict:
    overrides = harness.overrides(args)
    if args.batch is not None:
        overrides["train.batch_size"] = args.batch
    step = harness.build(CONFIG, harness.annotations_dir(args), overrides)
    out, batches = harness.measure(step, args.steps, args.warmup)
    host = []
    for i in range(args.steps):
        start = time.perf_counter()
        step.source(i + 1)
        host.append(time.perf_counter() - start)
    inputs = step.tables["inputs"]
    out.update(
        batch=int(step.config.train.batch_size),
        rows=int(inputs["video"].shape[0]),
        video_dim=int(inputs["video"].shape[-1]),
        text_dim=int(inputs["text_feature"].shape[-1]),
        host_batch_ms=statistics.median(host) * 1e3,
        matmul_precision=step.config.matmul_precision,
    )
    if args.profile:
        out["profile"] = harness.profile(step, batches)
    if args.parts:
        out["parts_ms"] = harness.parts(step, batches)
    return out


def torch_args(autocast: str):
    """A repetition's JAX report -> the PyTorch script's options (its sizes)."""

    def args(run: dict) -> list[str]:
        sizes = [
            f"--{key.replace('_', '-')}={run[key]}"
            for key in ("batch", "rows", "video_dim", "text_dim")
        ]
        return [*sizes, f"--autocast={autocast}"]

    return args


def table(report: dict) -> str:
    span = harness.span
    first = report["jax"][0]
    torch_ms = [r["median_ms"] for r in report["torch"]]
    host = [r["host_batch_ms"] for r in report["jax"]]
    rows = [
        f"| SMS heads step, batch {first['batch']}, {first['video_dim']}-d clips, "
        f"{first['text_dim']}-d captions (2 threads) | ms/step |",
        "|---|---|",
        f"| jaxsvr (`train_step`, jitted; {first['gflop_per_step']:.1f} GFLOP/step; "
        f"matmul_precision {first['matmul_precision']}) | "
        f"{span(harness.jax_ms(report), '{:.1f}')} |",
        f"| jaxsvr host batch (sampler + batch relevance) | {span(host, '{:.1f}')} |",
        f"| public PyTorch pattern (torch {report['torch'][0]['version']}; autocast "
        f"{report['torch'][0]['autocast']}) | {span(torch_ms, '{:.1f}')} |",
        "",
        f"Speed-up over the PyTorch pattern: {span(report['speedup'], '{:.2f}')}× (per "
        "repetition).",
    ]
    return "\n".join(
        rows + harness.profile_rows(report) + harness.parts_rows(report, JAX_PARTS, "{:.1f}")
    )


def main() -> None:
    p = harness.parser(__doc__)
    p.set_defaults(steps=20)  # tens of ms per step
    p.add_argument("--batch", type=cli.number(int, 2), help="default: the config's (128)")
    p.add_argument(
        "--torch-autocast",
        choices=("off", "bf16"),
        default="off",
        help="the PyTorch step's forward and loss under bfloat16 autocast",
    )
    args = p.parse_args()
    jax_args = () if args.batch is None else ("--batch", str(args.batch))
    harness.main(
        args,
        {"jax": jax_child},
        script=__file__,
        torch_script="sms_step_torch.py",
        table=table,
        first=("--parts", "--profile"),
        jax_args=jax_args,
        torch_args=torch_args(args.torch_autocast),
    )


if __name__ == "__main__":
    main()
