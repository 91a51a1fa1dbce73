"""HGR train step at the published batch: jaxsvr's jitted step against the public PyTorch
step pattern, measured back to back in one run, with the parts of each step timed.

  python benchmarks/hgr_step_speed.py [--torch-python PY] [--repeats 3] [--steps 10]
      [--annotations ../shared/data/epic100] [--json out.json]

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
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jaxsvr.runtime import cli

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_EPIC = ROOT.parent / "shared" / "data" / "epic100"
CONFIG = "configs/epic_hgr.py:ranp"


def _build(annotations: Path | None):
    """(jitted step, state, tables, batch source, mesh, run, config) of `CONFIG`."""
    import functools

    import jax

    from jaxsvr import configs
    from jaxsvr.runtime import parallel
    from jaxsvr.train import batches, loop, optim, pipeline

    config = configs.from_file(str(ROOT / CONFIG))
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
    return step, state, tables, source, mesh, run, config


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


def jax_child(annotations: Path | None, steps: int, warmup: int, parts: bool) -> dict:
    import jax
    import numpy as np

    from jaxsvr.runtime import parallel

    step, state, tables, source, mesh, run, config = _build(annotations)
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
    video_shape = tables["inputs"]["video"].shape
    out = {
        "ms_per_step": [t * 1e3 for t in times],
        "gflop_per_step": float(cost.get("flops", 0.0)) / 1e9,
        "device": f"{jax.devices()[0].platform} ({jax.devices()[0].device_kind})",
        "loss": float(np.asarray(metrics["loss"])),
        "segments": int(video_shape[1]) if len(video_shape) == 3 else 1,
        "words": int(tables["inputs"]["caption"].shape[1]),
        "vocab": int(run.model.vocab_size),
        "batch": int(config.train.batch_size),
        "caption_stats": caption_stats(tables, run.model.num_verbs),
    }
    if parts:
        out["parts_ms"] = _parts(step, state, tables, batches[warmup:], run, config.seed)
    return out


def _parts(step, state, tables, batches, run, seed: int) -> dict:
    """Median ms of each part of the step, each jitted on its own (module doc)."""
    import jax

    from jaxsvr.train import loop

    model, objective = run.model, run.objective
    rng = jax.random.fold_in(jax.random.key(seed), 0)
    video_rng, text_rng = jax.random.split(rng)

    def gather(batch):
        return loop.gather_device(tables, objective.gathers, batch)

    def video(params, inputs):
        return model.apply(
            params, inputs, True, method=model.embed_video, rngs={"dropout": video_rng}
        )

    def text(params, inputs):
        return model.apply(
            params, inputs, True, method=model.embed_text, rngs={"dropout": text_rng}
        )

    def scores_loss(params, v, t, batch):
        sims = model.apply(params, v, t, method=model.similarity)
        return sum(
            objective.weights[lv]
            * objective.fn(sims[lv], batch["rel"][:, i, :], **objective.kwargs)
            for i, lv in enumerate(objective.levels)
        )

    def forward(params, inputs, batch):
        return objective.loss(model, params, inputs, batch, rng)[0]

    def forward_backward(params, inputs, batch):
        return jax.value_and_grad(forward)(params, inputs, batch)

    params = state.params
    inputs = jax.jit(gather)(batches[0])
    v = jax.jit(video)(params, inputs)
    t = jax.jit(text)(params, inputs)
    calls = {
        "gather": (jax.jit(gather), (batches[0],)),
        "video": (jax.jit(video), (params, inputs)),
        "text": (jax.jit(text), (params, inputs)),
        "scores_loss": (jax.jit(scores_loss), (params, v, t, batches[0])),
        "forward": (jax.jit(forward), (params, inputs, batches[0])),
        "forward_backward": (jax.jit(forward_backward), (params, inputs, batches[0])),
    }
    ms = {}
    for name, (fn, args) in calls.items():
        jax.block_until_ready(fn(*args))
        times = []
        for _ in batches:
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times.append(time.perf_counter() - start)
        ms[name] = statistics.median(times) * 1e3
    times = []
    for batch in batches:
        start = time.perf_counter()
        state, metrics = step(state, tables, batch)
        jax.block_until_ready(metrics)
        times.append(time.perf_counter() - start)
    ms["step"] = statistics.median(times) * 1e3
    ms["backward"] = ms["forward_backward"] - ms["forward"]
    ms["optimiser"] = ms["step"] - ms["forward_backward"] - ms["gather"]
    return ms


def _run_child(args: list[str]) -> dict:
    r = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, cwd=ROOT, timeout=1800
    )
    if r.returncode:
        sys.exit(f"error: benchmark child {args} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _run_torch(python: str, steps: int, warmup: int, jax_run: dict) -> dict:
    script = ROOT / "benchmarks" / "hgr_step_torch.py"
    with tempfile.NamedTemporaryFile("w", suffix=".json") as stats:
        json.dump(jax_run["caption_stats"], stats)
        stats.flush()
        cmd = [python, str(script), "--threads", "2", "--steps", str(steps)]
        cmd += ["--warmup", str(warmup), "--segments", str(jax_run["segments"])]
        cmd += ["--words", str(jax_run["words"]), "--vocab", str(jax_run["vocab"])]
        cmd += ["--caption-stats", stats.name]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=3600)
    if r.returncode:
        sys.exit(f"error: the PyTorch reference failed ({python}):\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _span(values: list[float], fmt: str = "{:.0f}") -> str:
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def table(report: dict) -> str:
    jax_ms = [statistics.median(r["ms_per_step"]) for r in report["jax"]]
    torch_ms = [r["median_ms"] for r in report["torch"]]
    first = report["jax"][0]
    gflop = first["gflop_per_step"]
    rows = [
        f"| HGR step, batch {first['batch']}, {first['segments']} × 3072 segments, "
        f"{first['words']} token slots (2 threads) | ms/step |",
        "|---|---|",
        f"| jaxsvr (`train_step`, jitted; {gflop:.1f} GFLOP/step) | {_span(jax_ms)} |",
        f"| public PyTorch pattern (torch {report['torch'][0]['version']}) | {_span(torch_ms)} |",
        "",
        f"Speed-up over the PyTorch pattern: {_span(report['speedup'], '{:.2f}')}× (per "
        "repetition).",
    ]
    if "parts_ms" in first:
        names = ("gather", "video", "text", "scores_loss", "forward", "backward", "optimiser")
        rows.append(
            "Parts of the JAX step (ms, each jitted alone): "
            + ", ".join(f"{k} {first['parts_ms'][k]:.0f}" for k in names)
        )
    torch_parts = report["torch"][0]["parts_ms"]
    rows.append(
        "Parts of the PyTorch step (ms, first repetition): "
        + ", ".join(f"{k} {v:.0f}" for k, v in torch_parts.items())
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
    p.add_argument("--parts", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    annotations = (
        args.annotations if (args.annotations / "EPIC_100_retrieval_test.csv").is_file() else None
    )
    if args.child == "jax":
        print(json.dumps(jax_child(annotations, args.steps, args.warmup, args.parts)))
        return
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from evaluation_speed import cpu_model, emit  # beside this script

    report: dict = {"cpu": cpu_model(), "annotations": str(annotations), "jax": [], "torch": []}
    print(report["cpu"], file=sys.stderr)
    common = ["--steps", str(args.steps), "--warmup", str(args.warmup)]
    if annotations is not None:
        common += ["--annotations", str(annotations)]
    for rep in range(args.repeats):
        extra = ["--parts"] if rep == 0 else []
        report["jax"].append(_run_child(["--child", "jax", *common, *extra]))
        report["torch"].append(
            _run_torch(args.torch_python, args.steps, args.warmup, report["jax"][-1])
        )
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
