"""threefry2x32 lowered unrolled on the CPU (`jaxsvr.runtime.threefry`): the hash against
Random123's known answers, and the same bits as JAX's own lowering."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.random import threefry_2x32

from jaxsvr.runtime import threefry

U32 = 0xFFFFFFFF
# Random123's known-answer tests for Threefry-2x32-20 (kat_vectors): key, counter, output
KNOWN = [
    ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
    ((U32, U32), (U32, U32), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]


@pytest.mark.parametrize("key, count, out", KNOWN)
def test_known_answers_numpy(key, count, out):
    u = np.uint32
    words = [np.array([w], u) for w in (*key, *count)]
    assert [int(w[0]) for w in threefry.hash_2x32(*words)] == list(out)


def test_the_cpu_lowering_is_unrolled_and_draws_the_same_bits():
    def draws(key):
        a, b = jax.random.split(key)
        return (
            jax.random.bits(a, (257, 3)),
            jax.random.bernoulli(b, 0.7, (4, 9, 31)),
            jax.random.uniform(jax.random.fold_in(key, 5), (100,)),
        )

    key = jax.random.key(11)
    before = jax.jit(draws)(key)  # JAX's CPU lowering (unless a test here registered ours)
    assert threefry.lower_unrolled_on_cpu() and threefry.lower_unrolled_on_cpu()  # idempotent
    after = jax.jit(lambda k: draws(k))  # a new function: traced and lowered anew
    assert "while" not in after.lower(key).as_text()  # the rolled loop is gone
    for x, y in zip(before, after(key)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    # the primitive itself: known answers, and random words against the NumPy hash
    for key_words, count, out in KNOWN:
        got = jax.jit(threefry_2x32)(jnp.array(key_words, jnp.uint32), jnp.array(count, jnp.uint32))
        assert [int(w) for w in got] == list(out)
    rng = np.random.default_rng(0)
    k = rng.integers(0, 2**32, 2, dtype=np.uint32)
    x = rng.integers(0, 2**32, 2000, dtype=np.uint32)
    got = jax.jit(threefry_2x32)(jnp.asarray(k), jnp.asarray(x))
    want = np.concatenate(threefry.hash_2x32(k[0], k[1], x[:1000], x[1000:]))
    np.testing.assert_array_equal(np.asarray(got), want)


_LOOP = """
import jax
from jaxsvr.runtime import threefry
done = threefry.lower_unrolled_on_cpu()
text = jax.jit(lambda k: jax.random.bits(k, (8,))).lower(jax.random.key(0)).as_text()
print(done, "while" in text)
"""


def test_the_switch_keeps_jaxs_lowering():
    env = dict(os.environ, JAX_PLATFORMS="cpu", **{threefry.SWITCH: "loop"})
    r = subprocess.run(
        [sys.executable, "-c", _LOOP], capture_output=True, text=True, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True"]  # not registered: JAX's rolled loop
