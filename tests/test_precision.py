"""`config.matmul_precision`: the scope it opens, and one-line errors for unknown names."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsvr import configs
from jaxsvr.errors import InputError
from jaxsvr.runtime import precision
from jaxsvr.train import checks


@pytest.mark.parametrize("name", ["default", "highest", "high", "tensorfloat32"])
def test_scope_sets_the_jax_default_and_restores_it(name):
    before = jax.config.jax_default_matmul_precision
    with precision.scope(name):
        want = before if name == "default" else name  # "default" leaves JAX's setting
        assert jax.config.jax_default_matmul_precision == want
    assert jax.config.jax_default_matmul_precision == before


def test_unknown_name_is_an_input_error_naming_the_key():
    c = configs.base()
    c.matmul_precision = "fast"
    with pytest.raises(InputError, match="config.matmul_precision 'fast'"):
        checks.check_train(c)


@pytest.mark.parametrize("name, want", [("highest", "HIGHEST"), ("default", "DEFAULT")])
def test_programs_traced_in_the_scope_carry_its_precision(name, want):
    """Checked on the lowered program, so it holds on CPUs, where every precision computes
    float32 (conftest pins "highest" for the session: reset it first)."""
    a = np.ones((4, 8), np.float32)
    with jax.default_matmul_precision(None), precision.scope(name):
        text = jax.jit(jnp.matmul).lower(a, a.T).as_text()
    assert f"precision = [{want}, {want}]" in text
