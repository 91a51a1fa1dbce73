"""Batch loss + gradient time for B in {64, 256, 1024}: each loss is one jitted program
(similarity matrix from 256-d unit embeddings, the loss, and its gradient w.r.t. both
embeddings), timed after compilation on this machine's default device.

  python benchmarks/loss_speed.py [--sizes 64 256 1024] [--repeats 50]

Prints a markdown table: median milliseconds per call for each loss and B, and the growth
from the smallest to the largest B (the [B, B] work grows as B^2: 256x from 64 to 1024).
Also reports the number of XLA executables behind each call (1 = a single program).
"""

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxsvr import losses
from jaxsvr.runtime import cli


def program(fn, with_rel: bool):
    def loss(v, t, rel):
        sim = v @ t.T
        return fn(sim, rel) if with_rel else fn(sim)

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))


def measure(fn, b: int, dim: int, repeats: int) -> tuple[float, int]:
    rng = np.random.default_rng(b)
    v = rng.normal(size=(b, dim)).astype(np.float32)
    t = rng.normal(size=(b, dim)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    rel = rng.choice(np.array([0, 0.25, 0.5, 0.75, 1.0], np.float32), (b, b))
    np.fill_diagonal(rel, 1.0)
    v, t, rel = map(jnp.asarray, (v, t, rel))
    step = program(fn, losses.uses_relevance(fn))
    compiled = step.lower(v, t, rel).compile()
    executables = len(compiled.runtime_executable().hlo_modules())
    jax.block_until_ready(step(v, t, rel))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(step(v, t, rel))
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times), executables


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=cli.number(int, 1), nargs="+", default=[64, 256, 1024])
    p.add_argument("--dim", type=cli.number(int, 1), default=256)
    p.add_argument("--repeats", type=cli.number(int, 1), default=50)
    args = p.parse_args()
    device = jax.devices()[0]
    print(f"device: {device.platform} ({device.device_kind}), embeddings {args.dim}-d")
    head = " | ".join(f"B={b} (ms)" for b in args.sizes)
    print(f"| loss | {head} | B={args.sizes[-1]} / B={args.sizes[0]} | programs |")
    print("|---|" + "---|" * (len(args.sizes) + 2))
    for name, fn in losses.BATCH_LOSSES.items():
        results = [measure(fn, b, args.dim, args.repeats) for b in args.sizes]
        cells = " | ".join(f"{ms:.3f}" for ms, _ in results)
        growth = results[-1][0] / results[0][0]
        programs = max(n for _, n in results)
        print(f"| `{name}` | {cells} | {growth:.0f}x | {programs} |", flush=True)


if __name__ == "__main__":
    main()
