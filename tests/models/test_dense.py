"""`jaxsvr.models.dense`: the flattened Dense products equal `lax.dot_general`'s, values
and gradients, and `Dense` is `nn.Dense` (same parameters, same outputs); under the
"bfloat16" matmul precision (on CPUs and GPUs) they round their inputs (and, in the
gradients, the cotangent) to bfloat16 and sum in float32, against NumPy on the rounded
numbers."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsvr.models import heads
from jaxsvr.models.dense import (
    ATTENTION_DOT_GENERALS,
    ROUNDING_BACKENDS,
    Dense,
    flat_dot_general,
    rounds_to_bfloat16,
    row_major_copies,
)

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


def bf16(x) -> np.ndarray:
    """x rounded to bfloat16 (nearest even), as float64."""
    return np.asarray(x, np.float32).astype(jnp.bfloat16).astype(np.float64)


DENSE_CASES = CASES[:6] + [  # CASES' Dense forms (not its last two), and sizes the CPU
    ((16, 3, 24), (24, 40), DENSE),  # gives YNNPACK's bfloat16 kernels
    ((32, 64), (64, 48), (((1,), (0,)), ((), ()))),
]
ROUNDS = pytest.mark.skipif(
    jax.default_backend() not in ROUNDING_BACKENDS,
    reason='"bfloat16" keeps XLA\'s own meaning on TPUs',
)


@ROUNDS
@pytest.mark.parametrize("devices", [1, 8])
@pytest.mark.parametrize("lhs_shape, rhs_shape, dims", DENSE_CASES)
def test_bfloat16_products_and_gradients_against_numpy(
    lhs_shape, rhs_shape, dims, devices, monkeypatch
):
    """Values, input and weight gradients of the jitted product (as the CPU compiles it:
    bfloat16 operands, row-major transposed copies; with several devices or on a GPU,
    transposed views) against float64 NumPy on the rounded inputs and cotangent: bfloat16 products
    are exact in float32, so only the float32 sums differ."""
    monkeypatch.setattr(jax, "device_count", lambda: devices)
    rng = np.random.default_rng(3)
    lhs = rng.normal(size=lhs_shape).astype(np.float32)
    rhs = rng.normal(size=rhs_shape).astype(np.float32)
    c = len(dims[0][0])
    out_shape = lhs_shape[: len(lhs_shape) - c] + rhs_shape[c:]
    ct = rng.normal(size=out_shape).astype(np.float32)

    def vjp(a, b, g):
        out, pullback = jax.vjp(lambda a, b: flat_dot_general(a, b, dims), a, b)
        return out, *pullback(g)

    with jax.default_matmul_precision("bfloat16"):
        out, d_lhs, d_rhs = jax.jit(vjp)(lhs, rhs, ct)
        program = jax.jit(vjp).lower(lhs, rhs, ct).as_text()
    copies = devices == 1 and jax.default_backend() == "cpu"
    assert ("optimization_barrier" in program) == copies  # the copies, or views
    k = int(np.prod(rhs_shape[:c]))
    m = int(np.prod(rhs_shape[c:]))
    a, b, g = bf16(lhs).reshape(-1, k), bf16(rhs).reshape(k, m), bf16(ct).reshape(-1, m)
    tol = dict(rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out, (a @ b).reshape(out_shape), **tol)
    np.testing.assert_allclose(d_lhs, (g @ b.T).reshape(lhs_shape), **tol)
    np.testing.assert_allclose(d_rhs, (a.T @ g).reshape(rhs_shape), **tol)
    assert out.dtype == d_lhs.dtype == d_rhs.dtype == jnp.float32
    if lhs.size:  # the rounding took place: float32 products differ by far more
        assert np.abs(np.asarray(out) - np.tensordot(lhs, rhs, c)).max() > 1e-3


def test_which_products_round_to_bfloat16():
    f32, b16 = jnp.ones(2, jnp.float32), jnp.ones(2, jnp.bfloat16)
    assert not rounds_to_bfloat16(None, f32, f32)  # the tests pin "highest"
    with jax.default_matmul_precision("bfloat16"):
        assert rounds_to_bfloat16(None, f32, f32) == (jax.default_backend() != "tpu")
        assert not rounds_to_bfloat16(jax.lax.Precision.HIGHEST, f32, f32)  # its own
        assert not rounds_to_bfloat16(None, f32, b16)  # not float32: as the caller made it
    with jax.default_matmul_precision("tensorfloat32"):
        assert not rounds_to_bfloat16(None, f32, f32)


@pytest.mark.parametrize("backend, rounds, copies", [("gpu", True, False), ("tpu", False, False)])
def test_which_backends_round_and_copy(backend, rounds, copies, monkeypatch):
    """GPUs round the Dense inputs too (bfloat16 tensor-core products instead of JAX's
    TF32 DEFAULT) and take transposed operands (no copies); TPUs keep XLA's one bfloat16
    pass. The program a GPU would get, lowered here: bfloat16 operands, no barrier."""
    monkeypatch.setattr(jax, "default_backend", lambda: backend)
    monkeypatch.setattr(jax, "device_count", lambda: 1)
    f32 = jnp.ones(2, jnp.float32)
    with jax.default_matmul_precision("bfloat16"):
        assert rounds_to_bfloat16(None, f32, f32) == rounds
        assert row_major_copies() == copies
        lhs, rhs = jnp.ones((4, 3, 6)), jnp.ones((6, 5))
        program = jax.jit(jax.grad(lambda a, b: flat_dot_general(a, b, DENSE).sum(), (0, 1)))
        text = program.lower(lhs, rhs).as_text()
    assert ("bf16" in text) == rounds
    assert "optimization_barrier" not in text


@ROUNDS
def test_bfloat16_heads_and_attention_stay_near_float32():
    """Whole layers under the setting: the SMS heads' embeddings and their gradients, and
    attention with the flat projections, within bfloat16's rounding of float32."""
    rng = np.random.default_rng(4)
    model = heads.Model(vocab_size=1, video_dim=48, text_dim=16, embed_dim=8, hidden=32)
    batch = {
        "video": jnp.asarray(rng.normal(size=(6, 48)), jnp.float32),
        "text_feature": jnp.asarray(rng.normal(size=(6, 16)), jnp.float32),
    }
    params = model.init(jax.random.key(0), batch)

    def loss(p):
        v = model.apply(p, batch, method=model.embed_video)["action"]
        t = model.apply(p, batch, method=model.embed_text)["action"]
        return jnp.sum(jnp.sin(v @ t.T))

    want = jax.jit(jax.value_and_grad(loss))(params)
    with jax.default_matmul_precision("bfloat16"):
        got = jax.jit(jax.value_and_grad(loss))(params)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(a, b, rtol=0.05, atol=0.05)
    assert not np.array_equal(got[0], want[0])

    x = jnp.asarray(rng.normal(size=(3, 5, 8)), jnp.float32)
    attention = nn.MultiHeadDotProductAttention(num_heads=2, **ATTENTION_DOT_GENERALS)
    p = attention.init(jax.random.key(1), x)
    want = attention.apply(p, x)
    with jax.default_matmul_precision("bfloat16"):
        got = jax.jit(attention.apply)(p, x)
    np.testing.assert_allclose(got, want, rtol=0.05, atol=0.05)
