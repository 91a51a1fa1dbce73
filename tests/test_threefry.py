"""threefry2x32 lowered unrolled on the CPU (`jaxsvr.runtime.threefry`): the hash against
Random123's known answers, and the same bits as JAX's own lowering. The registration is
process-wide, so it runs in subprocesses: the suite's own processes keep JAX's lowering
(tests/conftest.py)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

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


_REGISTER = """
import json, sys
import jax, jax.numpy as jnp, numpy as np
from jax.extend.random import threefry_2x32
from jaxsvr.runtime import threefry

def draws(key):
    a, b = jax.random.split(key)
    return (
        jax.random.bits(a, (257, 3)),
        jax.random.bernoulli(b, 0.7, (4, 9, 31)),
        jax.random.uniform(jax.random.fold_in(key, 5), (100,)),
    )

key = jax.random.key(11)
before = jax.jit(draws)(key)  # JAX's CPU lowering: its rolled loop
looped = "while" in jax.jit(draws).lower(key).as_text()
done = threefry.lower_unrolled_on_cpu() and threefry.lower_unrolled_on_cpu()  # idempotent
after = jax.jit(lambda k: draws(k))  # a new function: traced and lowered anew
unrolled = "while" not in after.lower(key).as_text()
same = all(np.array_equal(x, y) for x, y in zip(before, after(key)))
u32 = lambda words: jnp.array(words, jnp.uint32)
hashed = jax.jit(threefry_2x32)
known = [[int(w) for w in hashed(u32(k), u32(c))] for k, c in json.loads(sys.argv[1])]
rng = np.random.default_rng(0)
k = rng.integers(0, 2**32, 2, dtype=np.uint32)
x = rng.integers(0, 2**32, 2000, dtype=np.uint32)
got = np.asarray(jax.jit(threefry_2x32)(jnp.asarray(k), jnp.asarray(x)))
words = np.array_equal(got, np.concatenate(threefry.hash_2x32(k[0], k[1], x[:1000], x[1000:])))
print(json.dumps(dict(done=done, looped=looped, unrolled=unrolled, same=same, known=known,
                      words=words)))
"""


def _run(script: str, *args: str, **env) -> str:
    environ = {k: v for k, v in os.environ.items() if k != threefry.SWITCH}
    environ.update(JAX_PLATFORMS="cpu", **env)
    r = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().splitlines()[-1]


def test_the_cpu_lowering_is_unrolled_and_draws_the_same_bits():
    """Before: JAX's loop; after: no loop, and the same bits for split, bits, bernoulli and
    uniform draws; the primitive gives Random123's answers and the NumPy hash's words."""
    out = json.loads(_run(_REGISTER, json.dumps([[k, c] for k, c, _ in KNOWN])))
    assert out["done"] and out["looped"] and out["unrolled"] and out["same"]
    assert out["known"] == [list(o) for _, _, o in KNOWN]
    assert out["words"]


_LOOP = """
import jax
from jaxsvr.runtime import threefry
done = threefry.lower_unrolled_on_cpu()
text = jax.jit(lambda k: jax.random.bits(k, (8,))).lower(jax.random.key(0)).as_text()
print(done, "while" in text)
"""


def test_the_switch_keeps_jaxs_lowering():
    assert _run(_LOOP, **{threefry.SWITCH: "loop"}).split() == ["False", "True"]
