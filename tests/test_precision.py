"""`config.matmul_precision`: the scope it opens, and one-line errors for unknown names."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsvr import precision
from jaxsvr.errors import InputError


@pytest.mark.parametrize("name", ["default", "highest", "high", "tensorfloat32"])
def test_scope_sets_the_jax_default_and_restores_it(name):
    before = jax.config.jax_default_matmul_precision
    with precision.scope(name):
        want = before if name == "default" else name  # "default" leaves JAX's setting
        assert jax.config.jax_default_matmul_precision == want
    assert jax.config.jax_default_matmul_precision == before


def test_unknown_name_is_an_input_error_naming_the_key():
    with pytest.raises(InputError, match="config.matmul_precision 'fast'"):
        precision.scope("fast")


def test_highest_matches_a_float64_product_to_float32_rounding():
    """Holds on every backend (TensorFloat-32 on a GPU would not: 10-bit mantissa inputs)."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 64, 256), dtype=np.float32)
    with precision.scope("highest"):
        got = np.asarray(jax.jit(jnp.matmul)(a, b.T))
    want = a.astype(np.float64) @ b.T.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4)
