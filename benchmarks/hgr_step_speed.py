"""HGR train step at the published batch: jaxsvr's jitted step against the public PyTorch
step pattern, measured back to back in one run, with the parts of each step timed.

  python benchmarks/hgr_step_speed.py [--torch-python PY] [--repeats 3] [--steps 10]
      [--annotations ../shared/data/epic100] [--json out.json]
      [--matmul-precision bfloat16]

Published sizes (the RANP code's EPIC-100 HGR config, aranciokov/ranp): batch 64, 3072-d
segment features, 1024-d embeddings and BiGRU, 300-d words, 4 verb and 6 noun nodes, one
attention-GCN layer, the hard-positive (RANP) loss, Adam. `configs/epic_hgr.py:ranp` has
these; its synthetic features have 8 segments a clip and its captions 16 token slots
(EPIC narrations: 2-3 tokens typically, at most 12 in the train split), and the PyTorch
step gets the same: 8 segments, captions drawn with the train split's lengths and node
counts.

- `jax`: `jaxsvr.train.loop.train_step` jitted as the trainer jits it (device-resident
  features, the step gathers rows), timed per step after compilation; its FLOPs from
  XLA's cost analysis. In the first repetition also its parts, each jitted alone and timed
  as the median of the timed steps' count of calls: the row gather, the video encoder,
  the text encoder (GRU, nodes, GCN), scores + loss, the whole forward, forward +
  backward, the whole step; backward = (forward + backward) - forward, optimiser =
  step - (forward + backward) - gather.
- `torch`: `benchmarks/hgr_step_torch.py` in its own process: the step pattern of the
  public HGR / RANP training loop on random data of the same shapes, PyTorch 2.13.0 on the
  CPU, with its parts timed inside the step. `--torch-python` names an interpreter with
  torch (`pip install -e ".[torch-reference]"`, or a separate venv).

Both frameworks use 2 threads (the CPU's cores here; XLA uses every core). Each repetition
runs jax, then torch, in fresh processes; the speed-up is per repetition. Prints the CPU
model, a markdown table and one JSON object.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import step_comparison as harness  # beside this script

CONFIG = "configs/epic_hgr.py:ranp"
JAX_PARTS = ("gather", "video", "text", "scores_loss", "forward", "backward", "optimiser")


def caption_stats(tables: dict, num_verbs: int) -> dict:
    """Histograms of the train captions' token counts and present verb / noun nodes."""
    import numpy as np

    inputs = tables["inputs"]
    lengths = np.sum(np.asarray(inputs["caption"]) > 0, axis=1)
    role = np.asarray(inputs["node_role"]) > 0
    return {
        "lengths": np.bincount(lengths, minlength=inputs["caption"].shape[1] + 1).tolist(),
        "verbs": np.bincount(role[:, :num_verbs].sum(1), minlength=num_verbs + 1).tolist(),
        "nouns": np.bincount(
            role[:, num_verbs:].sum(1), minlength=role.shape[1] - num_verbs + 1
        ).tolist(),
    }


def jax_child(args: argparse.Namespace) -> dict:
    step = harness.build(CONFIG, harness.annotations_dir(args), harness.overrides(args))
    out, batches = harness.measure(step, args.steps, args.warmup)
    video_shape = step.tables["inputs"]["video"].shape
    out.update(
        segments=int(video_shape[1]) if len(video_shape) == 3 else 1,
        words=int(step.tables["inputs"]["caption"].shape[1]),
        vocab=int(step.run.model.vocab_size),
        batch=int(step.config.train.batch_size),
        caption_stats=caption_stats(step.tables, step.run.model.num_verbs),
    )
    if args.parts:
        out["parts_ms"] = harness.parts(step, batches)
    return out


def torch_args(jax_run: dict, folder: Path) -> list[str]:
    """The PyTorch step's sizes: the JAX run's segments, token slots, vocabulary and the
    caption histograms (in a file under `folder`)."""
    stats = folder / "caption_stats.json"
    stats.write_text(json.dumps(jax_run["caption_stats"]))
    return [
        "--segments",
        str(jax_run["segments"]),
        "--words",
        str(jax_run["words"]),
        "--vocab",
        str(jax_run["vocab"]),
        "--caption-stats",
        str(stats),
    ]


def table(report: dict) -> str:
    span = harness.span
    torch_ms = [r["median_ms"] for r in report["torch"]]
    first = report["jax"][0]
    gflop = first["gflop_per_step"]
    rows = [
        f"| HGR step, batch {first['batch']}, {first['segments']} × 3072 segments, "
        f"{first['words']} token slots (2 threads) | ms/step |",
        "|---|---|",
        f"| jaxsvr (`train_step`, jitted; {gflop:.1f} GFLOP/step) | "
        f"{span(harness.jax_ms(report))} |",
        f"| public PyTorch pattern (torch {report['torch'][0]['version']}) | {span(torch_ms)} |",
        "",
        f"Speed-up over the PyTorch pattern: {span(report['speedup'], '{:.2f}')}× (per "
        "repetition).",
    ]
    return "\n".join(rows + harness.parts_rows(report, JAX_PARTS))


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        harness.main(
            harness.parser(__doc__).parse_args(),
            {"jax": jax_child},
            script=__file__,
            torch_script="hgr_step_torch.py",
            table=table,
            first=("--parts",),
            torch_args=lambda jax_run: torch_args(jax_run, Path(folder)),
        )


if __name__ == "__main__":
    main()
