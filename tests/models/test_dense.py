"""`jaxsvr.models.dense`: the flattened Dense products equal `lax.dot_general`'s, values
and gradients, and `Dense` is `nn.Dense` (same parameters, same outputs)."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsvr.models.dense import ATTENTION_DOT_GENERALS, Dense, flat_dot_general

DENSE = (((2,), (0,)), ((), ()))

CASES = [  # lhs shape, rhs shape, dimension numbers
    ((4, 3, 6), (6, 5), DENSE),  # Dense over [n, W, d]
    ((4, 3, 2, 6), (6, 5), (((3,), (0,)), ((), ()))),  # [n, W, L, d]
    ((4, 3, 6), (6, 2, 5), DENSE),  # attention's query/key/value: features (heads, depth)
    ((4, 3, 2, 5), (2, 5, 6), (((2, 3), (0, 1)), ((), ()))),  # attention's output
    ((4, 6), (6, 5), (((1,), (0,)), ((), ()))),  # already a matrix product
    ((0, 3, 6), (6, 5), DENSE),  # no rows
    ((4, 3, 6), (4, 6, 5), (((2,), (1,)), ((0,), (0,)))),  # batch axes: left as it is
    ((6, 3, 4), (6, 5), (((0,), (0,)), ((), ()))),  # contracts a leading axis: as it is
]


@pytest.mark.parametrize("lhs_shape, rhs_shape, dims", CASES)
def test_values_and_gradients_equal_dot_general(lhs_shape, rhs_shape, dims):
    rng = np.random.default_rng(0)
    lhs = jnp.asarray(rng.normal(size=lhs_shape), jnp.float32)
    rhs = jnp.asarray(rng.normal(size=rhs_shape), jnp.float32)
    want = jax.lax.dot_general(lhs, rhs, dims)
    got = flat_dot_general(lhs, rhs, dims)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    def loss(f):
        return lambda a, b: jnp.sum(jnp.sin(f(a, b, dims)))

    g_want = jax.grad(loss(jax.lax.dot_general), argnums=(0, 1))(lhs, rhs)
    g_got = jax.grad(loss(flat_dot_general), argnums=(0, 1))(lhs, rhs)
    for a, b in zip(g_got, g_want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_dense_is_flax_dense():
    x = jnp.asarray(np.random.default_rng(1).normal(size=(4, 3, 6)), jnp.float32)
    ours, flax_dense = Dense(5, name="proj"), nn.Dense(5, name="proj")
    params = ours.init(jax.random.key(0), x)
    assert jax.tree.map(jnp.shape, params) == jax.tree.map(
        jnp.shape, flax_dense.init(jax.random.key(0), x)
    )
    for a, b in zip(
        jax.tree.leaves(params), jax.tree.leaves(flax_dense.init(jax.random.key(0), x))
    ):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(
        ours.apply(params, x), flax_dense.apply(params, x), rtol=1e-6, atol=1e-6
    )


def test_attention_with_flat_products_matches_flax():
    x = jnp.asarray(np.random.default_rng(2).normal(size=(3, 5, 8)), jnp.float32)
    ours = nn.MultiHeadDotProductAttention(num_heads=2, **ATTENTION_DOT_GENERALS)
    theirs = nn.MultiHeadDotProductAttention(num_heads=2)
    params = ours.init(jax.random.key(0), x)
    np.testing.assert_allclose(ours.apply(params, x), theirs.apply(params, x), rtol=1e-5, atol=1e-6)
