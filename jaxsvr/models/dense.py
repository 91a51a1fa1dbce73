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

`Dense` builds an `nn.Dense` with it (so the same parameter names, auto-names and
initialisation); `ATTENTION_DOT_GENERALS` are the keyword arguments that give
`nn.MultiHeadDotProductAttention`'s projections the same.
"""

from __future__ import annotations

import functools
import math

import flax.linen as nn
import jax


def flat_dot_general(
    lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, **kwargs
):
    """`lax.dot_general`; when it contracts the last c axes of `lhs` (in order) with the
    first c of `rhs` and has no batch axes (every Dense layer), computed as one 2-D
    product of the flattened operands and reshaped back: the same values."""
    (lhs_c, rhs_c), (lhs_b, rhs_b) = dimension_numbers
    c = len(lhs_c)
    free = lhs.ndim - c
    dense_form = (
        not lhs_b
        and not rhs_b
        and tuple(lhs_c) == tuple(range(free, lhs.ndim))
        and tuple(rhs_c) == tuple(range(c))
    )
    if not dense_form or (free == 1 and rhs.ndim - c == 1):  # already a matrix product
        return jax.lax.dot_general(
            lhs,
            rhs,
            dimension_numbers,
            precision,
            preferred_element_type=preferred_element_type,
            **kwargs,
        )
    rows, k, m = (math.prod(s) for s in (lhs.shape[:free], lhs.shape[free:], rhs.shape[c:]))
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
