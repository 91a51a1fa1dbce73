"""The shell the PyTorch reference steps (`benchmarks/*_step_torch.py`) share: thread
settings, the command line, the timing loop and the JSON line they end with.

Each reference script defines its model, data and `train_step` after the public code it
follows, and runs in its own process under an interpreter with torch (jaxsvr never
imports torch; `benchmarks/step_comparison.py` starts these scripts). This module
imports only torch and the standard library, as the scripts do.

  p = torch_reference.parser(__doc__, steps=10)
  args = p.parse_args()
  torch_reference.set_threads(args.threads)
  times, outputs = torch_reference.time_steps(lambda b: train_step(...), batches, warmup)
  print(json.dumps(torch_reference.result(times, parts_ms=...)))
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch


def set_threads(threads: int) -> None:
    """`threads` intra-op threads and one inter-op thread."""
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # can only be set once, before any inter-op work
        pass


def at_least(low: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= low (these scripts run where jaxsvr may not be
    installed, so not `jaxsvr.runtime.cli.number`)."""

    def parse(text: str) -> int:
        if not (text.strip().lstrip("-").isdigit() and int(text) >= low):
            raise argparse.ArgumentTypeError(f"give a whole number at least {low}, not {text!r}")
        return int(text)

    return parse


def parser(doc: str, steps: int) -> argparse.ArgumentParser:
    """The reference scripts' common options (`steps`: the default timed steps); a script
    adds its own."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--threads", type=at_least(1), default=2)
    p.add_argument("--steps", type=at_least(1), default=steps)
    p.add_argument("--warmup", type=at_least(0), default=3)
    p.add_argument("--seed", type=at_least(0), default=0)
    # Correctness check: --steps steps on one fixed batch, printing the losses.
    p.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    return p


def time_steps(step: Callable[[Any], Any], batches: list, warmup: int) -> tuple[list, list]:
    """Runs `step` on each batch; returns the ms of each step after the first `warmup`,
    and what those steps returned."""
    times, outputs = [], []
    for i, batch in enumerate(batches):
        start = time.perf_counter()
        out = step(batch)
        if i >= warmup:
            times.append((time.perf_counter() - start) * 1e3)
            outputs.append(out)
    return times, outputs


def median_parts(parts: list[dict]) -> dict:
    """Median ms of each part over the steps' {part: seconds} dicts."""
    return {k: round(statistics.median(p[k] for p in parts) * 1e3, 3) for k in parts[0]}


def check_losses(losses: list[float]) -> dict:
    """Prints the losses of a `--check` run; returns its JSON line's object."""
    for i, loss in enumerate(losses):
        print(f"step {i}: loss {loss:.6f}")
    return {"framework": "torch", "check": True, "losses": losses}


def result(times: list[float], **extra) -> dict:
    """The JSON line's object: framework, version, threads, ms_per_step (each timed step),
    median_ms, then `extra`."""
    return {
        "framework": "torch",
        "version": torch.__version__,
        "threads": torch.get_num_threads(),
        "ms_per_step": [round(t, 3) for t in times],
        "median_ms": round(statistics.median(times), 3),
        **extra,
    }


class Laps:
    """Seconds of a step's parts: `lap(name)` adds the time since the previous lap (or
    since creation) to `parts[name]`."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = {}
        self.last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.parts[name] = self.parts.get(name, 0.0) + now - self.last
        self.last = now
