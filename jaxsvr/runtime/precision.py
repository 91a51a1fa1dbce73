"""Precision of float32 matrix products in the trainer's programs: `config.matmul_precision`.

XLA picks the precision of a float32 `dot` per backend. CPUs compute float32. NVIDIA
Ampere and Hopper GPUs use TensorFloat-32 by default (10-bit mantissa inputs, float32
accumulation) and TPUs bfloat16 passes: faster, but embeddings and similarities move by
about 1e-4 from float32, enough to swap near-tied ranks (H100 figures, speed and error:
docs/benchmarks.md#training-speed).

- "default" (default): leaves JAX's setting alone (`JAX_DEFAULT_MATMUL_PRECISION` or
  `jax.config`, else the backend's choice: TF32 on GPUs, one bfloat16 pass on TPUs,
  float32 on CPUs). Every GPU figure in the README was measured so.
- "highest": float32 products on every backend, as the PyTorch reference code of JPoSE /
  ConTra computes them (PyTorch leaves TF32 off for matmuls). The test suite runs so.
- "bfloat16": mixed precision. On CPUs and GPUs jaxsvr's Dense layers (every model's
  projections and MLPs, ConTra's attention projections) round their inputs to bfloat16
  and sum in float32, gradients too (`jaxsvr.models.dense.bfloat16_product`);
  parameters, optimiser state, activations, similarities and losses stay float32, and
  other products keep JAX's meaning of the name (DEFAULT: float32 on a CPU, where XLA
  computes float32 whatever precision a float32 product asks for; TensorFloat-32 on
  recent NVIDIA GPUs). On the 2-core EPYC (Zen 4, with bfloat16 instructions) the ConTra
  step takes 1.2 s instead of 2.1, JPoSE's 94 ms instead of 163, the SMS heads' 15 ms
  instead of 20; on an H100 ConTra's 4.0–4.5 ms instead of 5.1–5.6 (TF32); logged
  losses move by 1e-5 to 1e-3 relative (docs/training.md#precision). On TPUs JAX's own
  meaning: DEFAULT, one bfloat16 pass. CPUs without bfloat16 instructions and GPUs
  without bfloat16 tensor cores (before Ampere) may gain nothing: measure first.
- "high" (bfloat16_3x on TPU, TF32 on GPU), or another name `jax.default_matmul_precision`
  takes: "float32", "tensorfloat32".
"""

import contextlib
import functools
from collections.abc import Callable

import jax

PRECISIONS = ("default", "high", "highest", "float32", "tensorfloat32", "bfloat16")


def scope(name: str):
    """A context manager in which every float32 product traced on this thread uses
    precision `name` (JAX's setting is thread-local: a jit traced on another thread, like
    the input pipeline's, keeps JAX's own setting). `name` is one of `PRECISIONS`
    (`jaxsvr.train.checks` checks `config.matmul_precision`)."""
    if name == "default":
        return contextlib.nullcontext()
    return jax.default_matmul_precision(name)


def of_run(config) -> str:
    """The precision a run's programs were traced under: its `matmul_precision`, or
    "default" for a config.json written before the key existed."""
    return config.get("matmul_precision", "default")


def traced_under(name: str, fn: Callable) -> Callable:
    """`fn`, called (and so traced, when `jax.jit` wraps it) under `scope(name)`: a
    program of a trained run, re-traced elsewhere, computes as the run's did."""

    @functools.wraps(fn)  # a partial too: jit reads its signature through __wrapped__
    def traced(*args, **kwargs):
        with scope(name):
            return fn(*args, **kwargs)

    return traced
