"""ConTra train step at the published EPIC-100 sizes: jaxsvr's jitted step against the
public PyTorch step pattern, measured side by side in one run, with the parts of each
step timed.

  python benchmarks/contra_step_speed.py [--torch-python PY] [--repeats 3] [--steps 5]
      [--warmup 2] [--annotations ../shared/data/epic100] [--json out.json]
      [--matmul-precision bfloat16]

Published sizes (adrianofragomeni/ConTra: the README's EPIC-KITCHENS-100 clip-context
command and `src/utils/utils.py`'s defaults): batch 512, clip context m = 4 (windows of 9
clips of 3072-d features), a 2-layer, 8-head transformer (feed-forward 2048, dropout
0.3) over 512-d projections, the S3D sentence model (300-d words -> 2048 -> max -> 512),
the loss CML + UNI + NEI (temperature 0.07), Adam with the linear warm-up.
`configs/epic_contra.py` has these (synthetic features of the EPIC-100 train split when
../shared/data/epic100 is there, else the built-in data).

- `jax`: `jaxsvr.train.loop.train_step` jitted as the trainer jits it (device-resident
  features and windows, the step gathers the anchors' and neighbours' windows), timed per
  step after compilation; its FLOPs from XLA's cost analysis. In the first repetition
  also XLA's ops by kind from a profiler trace (`step_comparison.profile`) and the step's
  parts, each jitted alone (`step_comparison.parts`; here with the neighbours' video
  forward).
- `torch`: `benchmarks/contra_step_torch.py` in its own process: the public step pattern
  on random data of the same shapes (the JAX run's number of train rows and fraction of
  clips with a neighbour), PyTorch on the CPU, with its parts timed inside the step.

Where the two differ (docs/models.md#contra): jaxsvr's sentence max skips padding, its
word table is learned (the public one frozen), and with m_text = 0 it runs no text
transformer over a window of one sentence; the clip side, which holds nearly all the
work, is the same computation.

Both frameworks use 2 threads; each repetition runs jax, then torch, in fresh processes;
the speed-up is per repetition. Prints the CPU model, a markdown table and one JSON
object.
"""

from __future__ import annotations

import argparse

import step_comparison as harness  # beside this script

CONFIG = "configs/epic_contra.py"
JAX_PARTS = ("gather", "video", "neighbour_video", "text", "forward", "backward", "optimiser")


def jax_child(args: argparse.Namespace) -> dict:
    import jax
    import numpy as np

    step = harness.build(CONFIG, harness.annotations_dir(args), harness.overrides(args))
    out, batches = harness.measure(step, args.steps, args.warmup)
    model = step.run.model
    out.update(
        batch=int(step.config.train.batch_size),
        window=2 * model.m_video + 1,
        video_dim=int(step.tables["inputs"]["video"].shape[-1]),
        rows=int(step.tables["inputs"]["video"].shape[0]),
        has_neighbour=float(np.mean([np.asarray(b["has_neighbour"]) for b in batches])),
    )
    if args.profile:
        out["profile"] = harness.profile(step, batches)
    if args.parts:
        rng = jax.random.key(0)

        def neighbour_video(params, inputs):
            x = {"video": inputs["neighbour_video"]}
            return model.apply(params, x, True, method=model.embed_video, rngs={"dropout": rng})

        out["parts_ms"] = harness.parts(step, batches, {"neighbour_video": neighbour_video})
    return out


def table(report: dict) -> str:
    span = harness.span
    first = report["jax"][0]
    torch_ms = [r["median_ms"] for r in report["torch"]]
    rows = [
        f"| ConTra step, batch {first['batch']}, windows of {first['window']} × "
        f"{first['video_dim']} (2 threads) | ms/step |",
        "|---|---|",
        f"| jaxsvr (`train_step`, jitted; {first['gflop_per_step']:.0f} GFLOP/step) | "
        f"{span(harness.jax_ms(report))} |",
        f"| public PyTorch pattern (torch {report['torch'][0]['version']}) | {span(torch_ms)} |",
        "",
        f"Speed-up over the PyTorch pattern: {span(report['speedup'], '{:.2f}')}× (per "
        "repetition).",
    ]
    return "\n".join(rows + harness.profile_rows(report) + harness.parts_rows(report, JAX_PARTS))


def torch_args(run: dict) -> list[str]:
    return ["--rows", str(run["rows"]), "--has-neighbour", str(run["has_neighbour"])]


def main() -> None:
    p = harness.parser(__doc__)
    p.set_defaults(steps=5, warmup=2)  # seconds per step on two cores
    harness.main(
        p.parse_args(),
        {"jax": jax_child},
        script=__file__,
        torch_script="contra_step_torch.py",
        table=table,
        first=("--parts", "--profile"),
        torch_args=torch_args,
    )


if __name__ == "__main__":
    main()
