"""Evaluation: nDCG, mAP and instance metrics, exactly as EPIC-KITCHENS-100 computes them.

- `metrics`: `evaluate(sim, rel)`, the metric definitions, input checks, the reduction.
- `query_stats`: per-query statistics, the boundary shared by the engines; tie rule.
- `numpy_engine`: the CPU engine (packed-key sort, sparse statistics, threads), with its
  compiled kernel (`compiled_kernel`, `rank_kernel.c`) where it was built: same numbers.
- `jax_engine`: the jitted engine for accelerators.
- `streamed`: metrics from embeddings and class sets, block by block, never holding the
  [n_videos, n_texts] matrices.
- `python -m jaxsvr.evaluate`: the command line.
"""

from jaxsvr.evaluation.metrics import check_inputs, evaluate, summarize

__all__ = ["check_inputs", "evaluate", "summarize"]
