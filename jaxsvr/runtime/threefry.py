"""JAX's threefry2x32 hash lowered unrolled on the CPU: the same bits, drawn faster.

Every random bit jaxsvr draws (dropout masks, shuffles inside a step) comes from
threefry2x32 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011; the
Random123 library). On the CPU, JAX lowers the hash as a rolled `while` loop over its five
groups of four rounds, which XLA runs as five passes over every array of bits with the
loop state written out between them; on other platforms it lowers the 20 rounds unrolled
into one elementwise program. `lower_unrolled_on_cpu()` registers the unrolled form for
the CPU too. The hash is the same function, so every key draws the same bits as before
(tests/test_threefry.py: Random123's known answers and JAX's default lowering); only the
compiled program differs. A ConTra step's dropout masks (about 70 M words of bits) cost
about 0.3 s per pass less on two cores, at the price of a second or two more compilation
(docs/benchmarks.md, the ConTra step).

It is process-wide (every later compilation of the primitive in the process), so the
commands that own their process call it (`python -m jaxsvr.main`); a library user can
call it the same way. `JAXSVR_THREEFRY=loop` in the environment keeps JAX's lowering.
Only public JAX interfaces are used (`jax.extend.random`'s primitive,
`jax.interpreters.mlir`'s registration); the hash itself is written here.
"""

from __future__ import annotations

import os

import numpy as np

# Threefry-2x32's rotation constants, per round within the alternating groups of four
# (Random123's R_32x2), and the key-schedule parity constant (SKEIN_KS_PARITY32).
ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
PARITY = np.uint32(0x1BD11BDA)
GROUPS = 5  # 5 groups of 4 rounds: Threefry-2x32-20, the variant JAX draws with
SWITCH = "JAXSVR_THREEFRY"  # "loop": keep JAX's CPU lowering

_registered = False


def hash_2x32(k0, k1, x0, x1):
    """Threefry-2x32-20 of the counter words (x0, x1) under the key (k0, k1): uint32
    arrays that broadcast together; returns the two output words. Traceable (jax.numpy
    arrays) and plain NumPy alike."""
    ks = (k0, k1, k0 ^ k1 ^ PARITY)
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for group in range(GROUPS):
        for r in ROTATIONS[group % 2]:
            x0 = x0 + x1
            x1 = (x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r))  # rotate left by r
            x1 = x1 ^ x0
        # key injection after each group: the next key words, plus the group count
        x0 = x0 + ks[(group + 1) % 3]
        x1 = x1 + ks[(group + 2) % 3] + np.uint32(group + 1)
    return x0, x1


def lower_unrolled_on_cpu() -> bool:
    """Registers the unrolled lowering of JAX's threefry2x32 primitive for the CPU (see
    the module docstring). Idempotent; functions jitted and called before keep their
    lowering (JAX caches it per function), so call it before anything is compiled. Returns
    False, changing nothing, when `JAXSVR_THREEFRY=loop` asks to keep JAX's lowering or
    this JAX lacks the interfaces it needs."""
    global _registered
    if _registered:
        return True
    if os.environ.get(SWITCH) == "loop":
        return False
    try:
        from jax.extend.random import threefry2x32_p
        from jax.interpreters.mlir import lower_fun, register_lowering
    except ImportError:
        return False
    rule = lower_fun(lambda *args: list(hash_2x32(*args)), multiple_results=True)
    register_lowering(threefry2x32_p, rule, platform="cpu")
    _registered = True
    return True
