"""ConTra's uniformity and neighbouring losses against plain loops (`reference_losses`):
values, gradients by finite differences, masking, jit/vmap. The cross-modal NCE is one of
the batch losses (`test_batch_losses.py`)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reference_losses import neighbour_nce as ref_neighbour_nce
from reference_losses import uniformity as ref_uniformity

from jaxsvr.losses import cross_modal_nce, neighbour_nce, uniformity


def unit(rng, n, d=6):
    x = rng.normal(size=(n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("n,t", [(2, 2.0), (5, 2.0), (9, 0.5)])
def test_uniformity_matches_loop(n, t):
    x = unit(np.random.default_rng(n), n)
    np.testing.assert_allclose(
        float(uniformity(jnp.asarray(x), t=t)), ref_uniformity(x, t=t), rtol=1e-5
    )


def test_uniformity_known_values_and_errors():
    x = unit(np.random.default_rng(0), 1)
    assert float(uniformity(jnp.asarray(np.concatenate([x, x])))) == pytest.approx(0.0, abs=1e-6)
    opposite = np.array([[1.0, 0.0], [-1.0, 0.0]], np.float32)  # ||u - u'||^2 = 4
    assert float(uniformity(jnp.asarray(opposite))) == pytest.approx(-8.0, rel=1e-6)
    with pytest.raises(ValueError, match="at least 2 rows"):
        uniformity(jnp.asarray(x))


def test_uniformity_gradient_matches_finite_differences():
    x = unit(np.random.default_rng(3), 5).astype(np.float64)
    got = np.asarray(jax.grad(uniformity)(jnp.asarray(x, jnp.float32)))
    h = 1e-5
    for idx in [(0, 0), (2, 3), (4, 5)]:
        up, down = x.copy(), x.copy()
        up[idx] += h
        down[idx] -= h
        fd = (ref_uniformity(up) - ref_uniformity(down)) / (2 * h)
        np.testing.assert_allclose(got[idx], fd, rtol=1e-3, atol=1e-5)


def neighbours(seed, b=7):
    rng = np.random.default_rng(seed)
    return unit(rng, b), unit(rng, b), unit(rng, b)


@pytest.mark.parametrize("temperature", [0.07, 1.0])
def test_neighbour_nce_matches_loop_with_mask(temperature):
    a, p, n = neighbours(1)
    for mask in (
        np.ones(7, bool),
        np.array([1, 0, 1, 1, 0, 0, 1], bool),
        np.eye(7, dtype=bool)[3],
    ):
        got = float(neighbour_nce(*map(jnp.asarray, (a, p, n, mask)), temperature=temperature))
        want = ref_neighbour_nce(a, p, n, mask, temperature=temperature)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=str(mask))


def test_neighbour_nce_masked_rows_do_not_matter():
    a, p, n = neighbours(2)
    mask = np.array([1, 0, 1, 1, 0, 0, 1], bool)
    moved = n.copy()
    moved[~mask] = -p[~mask]  # any negative for the rows without a neighbour
    args = [jnp.asarray(x) for x in (a, p, n, mask)]
    value = float(neighbour_nce(*args))
    assert float(neighbour_nce(args[0], args[1], jnp.asarray(moved), args[3])) == value
    grad = np.asarray(jax.grad(neighbour_nce)(*args))
    np.testing.assert_array_equal(grad[~mask], 0)
    assert np.all(grad[mask] != 0)


def test_neighbour_nce_without_any_neighbour_is_zero():
    a, p, n = neighbours(3)
    mask = np.zeros(7, bool)
    value, grad = jax.value_and_grad(neighbour_nce)(*map(jnp.asarray, (a, p, n, mask)))
    assert float(value) == 0.0 and ref_neighbour_nce(a, p, n, mask) == 0.0
    np.testing.assert_array_equal(grad, 0)


def test_neighbour_nce_gradient_matches_finite_differences():
    a, p, n = (x.astype(np.float64) for x in neighbours(4))
    mask = np.array([1, 1, 0, 1, 1, 1, 0], bool)
    got = np.asarray(
        jax.grad(neighbour_nce, argnums=(0, 1, 2))(
            *(jnp.asarray(x, jnp.float32) for x in (a, p, n)), mask
        )
    )
    h = 1e-5
    for which, idx in [(0, (0, 1)), (1, (3, 2)), (2, (5, 0))]:
        up, down = [a.copy(), p.copy(), n.copy()], [a.copy(), p.copy(), n.copy()]
        up[which][idx] += h
        down[which][idx] -= h
        fd = (ref_neighbour_nce(*up, mask) - ref_neighbour_nce(*down, mask)) / (2 * h)
        np.testing.assert_allclose(got[which][idx], fd, rtol=1e-3, atol=1e-4)


def test_jit_and_vmap():
    a, p, n = neighbours(5)
    mask = np.array([1, 0, 1, 1, 1, 0, 1], bool)
    args = [jnp.asarray(x) for x in (a, p, n, mask)]
    np.testing.assert_allclose(jax.jit(neighbour_nce)(*args), neighbour_nce(*args), rtol=1e-6)
    stacked = [jnp.stack([x, x[::-1]]) for x in args]
    got = jax.vmap(neighbour_nce)(*stacked)
    want = [ref_neighbour_nce(*(np.asarray(x[k]) for x in stacked)) for k in range(2)]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    x = jnp.stack([jnp.asarray(a), jnp.asarray(p)])
    np.testing.assert_allclose(
        jax.vmap(uniformity)(x), [ref_uniformity(a), ref_uniformity(p)], rtol=1e-5
    )
    sim = jnp.asarray(a @ p.T)
    np.testing.assert_allclose(jax.jit(cross_modal_nce)(sim), cross_modal_nce(sim), rtol=1e-6)


def test_neighbour_nce_with_k_neighbours_matches_loop():
    rng = np.random.default_rng(5)
    a, p = neighbours(3)[:2]
    n = rng.standard_normal((7, 3, a.shape[1])).astype(np.float32)
    n /= np.linalg.norm(n, axis=-1, keepdims=True)
    mask = rng.random((7, 3)) < 0.6
    mask[2] = False  # an anchor without any neighbour
    got = float(neighbour_nce(*map(jnp.asarray, (a, p, n, mask)), temperature=0.07))
    terms = []
    for i in range(7):
        if not mask[i].any():
            continue
        logits = [a[i] @ p[i] / 0.07] + [a[i] @ n[i, k] / 0.07 for k in range(3) if mask[i, k]]
        terms.append(np.logaddexp.reduce(np.float64(logits)) - logits[0])
    np.testing.assert_allclose(got, np.mean(terms), rtol=1e-5)
    # one neighbour as [B, 1, d] is the [B, d] loss
    one = neighbour_nce(*map(jnp.asarray, (a, p, n[:, :1], mask[:, :1])), temperature=0.07)
    ref = neighbour_nce(*map(jnp.asarray, (a, p, n[:, 0], mask[:, 0])), temperature=0.07)
    np.testing.assert_allclose(float(one), float(ref), rtol=1e-6)
