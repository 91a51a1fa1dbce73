"""Dense layers over [n, ..., d] inputs, as one [rows, d] x [d, m] product.

`nn.Dense` contracts the last axis of an [n, W, d] input with `lax.dot_general`, keeping
n and W as free axes. Its weight gradient then contracts the leading axes of the input and
of the cotangent (rows = n·W), and XLA's CPU back-end lowers that form with a transposed
copy of the cotangent and a plain product beside YNNPACK's (both slower: 90–160 GFLOP/s
against 155–200 for the same product written over [rows, d] on the 2-core EPYC).
`flat_dot_general` reshapes the operands to two dimensions first (a reshape of a
row-major array moves nothing), so the forward product, the input gradient and the weight
gradient are all ordinary matrix products over the same numbers; the output is reshaped
back. XLA may order a product's sums differently in the two forms, so results agree
within float32 rounding, and bit for bit where it does not.

What it saved (the train steps of `benchmarks/*_step_speed.py`, 2-core AMD EPYC Zen 4):
ConTra ~5% of its step (its clip projection, encoder layers and sentence model all take
[n, W, ...] inputs), HGR ~9% (the GRU's input projection and the role graph's layers over
[n, L, ...]); models whose layers see [n, d] inputs compile to the same program.

On CPUs and GPUs, under `config.matmul_precision = "bfloat16"` (JAX's default matmul
precision "bfloat16" where the product is traced, `jaxsvr.runtime.precision.scope`), a
float32 Dense product rounds its inputs to bfloat16 and sums in float32
(`bfloat16_product`), the mixed precision of TPUs' one-pass products. XLA's CPU back-end
ignores the precision of a float32 product (it computes float32 whatever is asked), so
without the explicit rounding the setting did nothing on a CPU; on a GPU JAX maps it to
DEFAULT, TensorFloat-32 on recent NVIDIA GPUs, where bfloat16 operands run the tensor
cores at twice TF32's rate (the ConTra step on an H100: 4.0–4.5 ms against 5.1–5.6). On
TPUs XLA's own meaning stands (one bfloat16 pass: `rounds_to_bfloat16`). The gradients
round the cotangent to bfloat16 too and sum in float32. On a single CPU device each of
the three products is a row-major [n, k] x [k, m] product of bfloat16 operands, the one
form YNNPACK's bfloat16 kernels take: the weight gradient multiplies a row-major
transposed copy of the input rows, the input gradient one of the weight
(`row_major_copies`). Such a product runs at 280–360 GFLOP/s on the 2-core EPYC (Zen 4)
against 170 in float32: the ConTra step takes 1.2 s instead of 2.1, JPoSE's 94 ms
instead of 163 (docs/benchmarks.md#mixed-precision-on-the-cpu). Parameters, optimiser
state, activations and losses stay float32.

`Dense` builds an `nn.Dense` with it (so the same parameter names, auto-names and
initialisation); `ATTENTION_DOT_GENERALS` are the keyword arguments that give
`nn.MultiHeadDotProductAttention`'s projections the same.
"""

from __future__ import annotations

import functools
import math

import flax.linen as nn
import jax
import jax.numpy as jnp

BFLOAT16 = "bfloat16"  # the matmul precision under which Dense products round to bfloat16
ROUNDING_BACKENDS = ("cpu", "gpu")  # where the Dense layers round to bfloat16 themselves


def rounds_to_bfloat16(precision, *operands) -> bool:
    """Whether a product traced here rounds its float32 inputs to bfloat16: on a CPU or
    GPU back-end (the default one), no precision of its own, JAX's default matmul
    precision "bfloat16" (by that name: the equivalent "BF16_BF16_F32" is left to XLA),
    float32 operands. On TPUs XLA gives "bfloat16" its own meaning (JAX maps it to
    DEFAULT: one bfloat16 pass)."""
    return (
        precision is None
        and jax.config.jax_default_matmul_precision == BFLOAT16
        and all(x.dtype == jnp.float32 for x in operands)
        and jax.default_backend() in ROUNDING_BACKENDS
    )


def row_major_copies() -> bool:
    """Whether `bfloat16_product`'s gradients multiply row-major transposed copies: on a
    CPU back-end with a single device (a GPU's products take transposed operands).
    XLA's CPU back-end keeps a transpose as a column-major view, which YNNPACK's bfloat16
    product does not take (XLA then runs that product in float32 on the rounded numbers),
    or folds it into the product as a transposed operand, which fails at run time when
    XLA had already given the product to YNNPACK. The copy (a flattening behind a
    barrier, which nothing folds away) would split a sharded batch across devices, so
    with several devices, here or in other processes, the transposes stay views."""
    return jax.default_backend() == "cpu" and jax.device_count() == 1


def _t(x: jax.Array, copy: bool) -> jax.Array:
    """`x.T` ([rows, cols] -> [cols, rows]); a row-major copy if `copy`."""
    if not copy:
        return x.T
    rows, cols = x.shape
    return jax.lax.optimization_barrier(x.T.reshape(-1)).reshape(cols, rows)


def _product(a: jax.Array, b: jax.Array) -> jax.Array:
    """[n, k] x [k, m] of bfloat16 operands, summed in float32."""
    return jnp.matmul(a, b, preferred_element_type=jnp.float32)


def _rounded(lhs: jax.Array, rhs: jax.Array) -> tuple[jax.Array, jax.Array]:
    if not lhs.dtype == rhs.dtype == jnp.float32:
        raise TypeError(f"bfloat16_product takes float32 operands, not {lhs.dtype}, {rhs.dtype}")
    return lhs.astype(jnp.bfloat16), rhs.astype(jnp.bfloat16)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def bfloat16_product(lhs: jax.Array, rhs: jax.Array, copies: bool = False) -> jax.Array:
    """`lhs @ rhs` ([n, k] x [k, m], both float32) of the operands rounded to bfloat16,
    summed in float32; its gradients round the cotangent to bfloat16 as well, and multiply
    row-major transposed copies if `copies` (`row_major_copies()`). A custom VJP: reverse
    mode only (`jax.jvp`, `jax.jacfwd` and `jax.hessian` of a Dense layer under the
    "bfloat16" precision raise JAX's TypeError)."""
    return _product(*_rounded(lhs, rhs))


def _bfloat16_forward(lhs, rhs, copies):
    a, b = _rounded(lhs, rhs)
    return _product(a, b), (a, b)


def _bfloat16_backward(copies, residuals, g):
    a, b = residuals  # [n, k], [k, m] bfloat16
    g = g.astype(jnp.bfloat16)  # [n, m]
    d_lhs = _product(g, _t(b, copies))  # a copy of k · m numbers for n · k · m products
    d_rhs = _product(_t(a, copies), g)
    return d_lhs, d_rhs


bfloat16_product.defvjp(_bfloat16_forward, _bfloat16_backward)


def flat_dot_general(
    lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, **kwargs
):
    """`lax.dot_general`; when it contracts the last c axes of `lhs` (in order) with the
    first c of `rhs` and has no batch axes (every Dense layer), computed as one 2-D
    product of the flattened operands and reshaped back: the same values. Under the
    "bfloat16" matmul precision that product is `bfloat16_product`."""
    (lhs_c, rhs_c), (lhs_b, rhs_b) = dimension_numbers
    c = len(lhs_c)
    free = lhs.ndim - c
    dense_form = (
        not lhs_b
        and not rhs_b
        and tuple(lhs_c) == tuple(range(free, lhs.ndim))
        and tuple(rhs_c) == tuple(range(c))
    )
    bf16 = (
        dense_form
        and rounds_to_bfloat16(precision, lhs, rhs)
        and preferred_element_type in (None, jnp.float32)
        and not kwargs
    )
    if not dense_form or (free == 1 and rhs.ndim - c == 1 and not bf16):  # a matrix product
        return jax.lax.dot_general(
            lhs,
            rhs,
            dimension_numbers,
            precision,
            preferred_element_type=preferred_element_type,
            **kwargs,
        )
    rows, k, m = (math.prod(s) for s in (lhs.shape[:free], lhs.shape[free:], rhs.shape[c:]))
    if bf16:
        out = bfloat16_product(lhs.reshape(rows, k), rhs.reshape(k, m), row_major_copies())
        return out.reshape(lhs.shape[:free] + rhs.shape[c:])
    out = jax.lax.dot_general(
        lhs.reshape(rows, k),
        rhs.reshape(k, m),
        (((1,), (0,)), ((), ())),
        precision,
        preferred_element_type=preferred_element_type,
        **kwargs,
    )
    return out.reshape(lhs.shape[:free] + rhs.shape[c:])


Dense = functools.partial(nn.Dense, dot_general=flat_dot_general)
ATTENTION_DOT_GENERALS = dict(qkv_dot_general=flat_dot_general, out_dot_general=flat_dot_general)
