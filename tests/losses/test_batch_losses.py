"""Batch losses against a plain-loop reference: values, gradients, edge cases, jit, vmap, sharding.

The reference (`tests/reference_losses.py`) is written from the specification in float64; the
package computes in float32, hence the relative tolerances. Gradients are compared with central
finite differences of the reference on every entry of `sim` that is not within reach of a kink
of the (piecewise-linear or mined) loss.
"""

import functools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reference_losses import REFERENCE_LOSSES

import jaxsvr.losses
from jaxsvr.losses import BATCH_LOSSES, uses_relevance

ROOT = Path(__file__).resolve().parents[2]
LEVELS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
NAMES = (
    "max_margin",
    "relevance_margin",
    "ran",
    "ranp",
    "semi_hard",
    "mimm",
    "adaptive_mimm",
    "sms",
    "info_nce",
    "cross_modal_nce",
    "multi_similarity",
)
RELEVANCE_NAMES = {"relevance_margin", "ran", "ranp", "adaptive_mimm", "sms", "multi_similarity"}
# Losses that are smooth in `sim` (apart from the mining thresholds of multi_similarity).
SMOOTH = {"info_nce", "cross_modal_nce", "multi_similarity"}

# (name, keywords): defaults, hard=False where it exists, and non-default values. tau = 0.5 or
# 0.75 hits relevance levels exactly (>= at the boundary); sms eps = 0.3 makes |W| = 0.25 "equal".
CASES = [
    ("max_margin", {}),
    ("max_margin", {"hard": False}),
    ("max_margin", {"margin": 0.5, "hard": False}),
    ("relevance_margin", {}),
    ("relevance_margin", {"hard": False}),
    ("ran", {}),
    ("ran", {"hard": False}),
    ("ran", {"tau": 0.5, "margin": 0.3}),
    ("ranp", {}),
    ("ranp", {"hard": False}),
    ("ranp", {"tau": 0.75, "margin_neg": 0.3, "margin_pos": 0.1}),
    ("ranp", {"tau": 0.5, "margin_neg": 0.1, "margin_pos": 0.5, "hard": False}),
    ("semi_hard", {}),
    ("semi_hard", {"margin": 0.5}),
    ("mimm", {}),
    ("mimm", {"margin": 0.5}),
    ("adaptive_mimm", {}),
    ("adaptive_mimm", {"margin": 0.7}),
    ("sms", {}),
    ("sms", {"margin": 0.3, "relax": 0.2, "eps": 0.3}),
    ("info_nce", {}),
    ("info_nce", {"temperature": 0.5}),
    ("cross_modal_nce", {}),
    ("cross_modal_nce", {"temperature": 0.5}),
    ("multi_similarity", {}),
    ("multi_similarity", {"tau": 0.5, "alpha": 1.0, "beta": 10.0, "lam": 0.2, "eps": 0.3}),
]
CASE_IDS = [name + "".join(f"-{k}={v}" for k, v in kw.items()) for name, kw in CASES]
# The defaults of every loss plus hard=False where the keyword exists, for the sharding check
# (which compiles every case on two meshes).
CORE_CASES = [(n, {}) for n in NAMES] + [
    (n, {"hard": False}) for n in ("max_margin", "relevance_margin", "ran", "ranp")
]


def batch(b: int, seed: int, diagonal: str = "one") -> tuple[np.ndarray, np.ndarray]:
    """float32 sim uniform in [-1, 1] and rel from LEVELS; diagonal all 1 or "mixed"."""
    rng = np.random.default_rng(seed)
    sim = rng.uniform(-1, 1, (b, b)).astype(np.float32)
    rel = rng.choice(LEVELS, (b, b)).astype(np.float32)
    if diagonal == "one":
        np.fill_diagonal(rel, 1.0)
    else:  # some matching pairs fully relevant, some not
        rel[0, 0] = 1.0
        if b > 1:
            rel[1, 1] = 0.5
    return sim, rel


def call(fn, name, sim, rel):
    """fn(sim, rel) for the losses that take the relevance, fn(sim) for the others."""
    return fn(sim, rel) if name in RELEVANCE_NAMES else fn(sim)


def package(name, kw, sim, rel) -> float:
    """The package loss, called eagerly (`test_jit` and the sharding check jit the losses)."""
    fn = functools.partial(BATCH_LOSSES[name], **kw)
    return float(call(fn, name, jnp.asarray(sim), jnp.asarray(rel)))


def package_grad(name, kw, sim, rel) -> np.ndarray:
    """d loss / d sim of the package loss, [B, B]."""
    fn = functools.partial(BATCH_LOSSES[name], **kw)
    return np.asarray(jax.grad(lambda s: call(fn, name, s, jnp.asarray(rel)))(jnp.asarray(sim)))


def reference(name, kw, sim, rel) -> float:
    if name in RELEVANCE_NAMES:
        return REFERENCE_LOSSES[name](sim, rel, **kw)
    return REFERENCE_LOSSES[name](sim, **kw)


def assert_value(name, kw, sim, rel):
    got, want = package(name, kw, sim, rel), reference(name, kw, sim, rel)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{name} {kw}")


def test_batch_losses_table():
    assert set(BATCH_LOSSES) == set(NAMES) == set(REFERENCE_LOSSES)
    for name, fn in BATCH_LOSSES.items():
        assert fn is getattr(jaxsvr.losses, name)
        assert uses_relevance(fn) == (name in RELEVANCE_NAMES), name


@pytest.mark.parametrize("b", [3, 8, 17])
@pytest.mark.parametrize("name,kw", CASES, ids=CASE_IDS)
def test_values_match_reference(name, kw, b):
    for seed, diagonal in [(b, "one"), (100 + b, "mixed")]:
        assert_value(name, kw, *batch(b, seed, diagonal))


def finite_difference(name, kw, sim, rel, h=1e-4):
    """Central differences of the float64 reference, and a mask of entries clear of kinks.

    An entry counts as clear when the one-sided slopes agree (piecewise-linear losses: exactly,
    up to rounding; smooth ones: up to curvature) and the central difference does not change
    with a 10x smaller step (a jump in the value, e.g. a mining threshold, would show).
    """
    x = sim.astype(np.float64)
    f0 = reference(name, kw, x, rel)
    fd = np.zeros_like(x)
    clear = np.zeros(x.shape, bool)
    for idx in np.ndindex(x.shape):
        f = {}
        for step in (h, -h, h / 10, -h / 10):
            y = x.copy()
            y[idx] += step
            f[step] = reference(name, kw, y, rel)
        right, left = (f[h] - f0) / h, (f0 - f[-h]) / h
        fd[idx] = (f[h] - f[-h]) / (2 * h)
        fine = (f[h / 10] - f[-h / 10]) / (h / 5)
        kink_tol = 1e-2 * (1 + abs(fd[idx])) if name in SMOOTH else 1e-7
        clear[idx] = abs(right - left) <= kink_tol and abs(fd[idx] - fine) <= 1e-6 * (
            1 + abs(fd[idx])
        )
    return fd, clear


@pytest.mark.parametrize("name,kw", CASES, ids=CASE_IDS)
def test_gradients_match_finite_differences(name, kw):
    for b, seed, diagonal in [(2, 7, "mixed"), (8, 8, "one"), (8, 9, "mixed")]:
        sim, rel = batch(b, seed, diagonal)
        got = package_grad(name, kw, sim, rel)
        fd, clear = finite_difference(name, kw, sim, rel)
        assert clear.mean() >= 0.75, f"too few entries clear of kinks: {clear.sum()} of {b * b}"
        atol = 2e-5 if name in SMOOTH else 1e-6
        np.testing.assert_allclose(
            got[clear], fd[clear], rtol=1e-4, atol=atol, err_msg=f"{name} {kw} B={b}"
        )


@pytest.mark.parametrize("name,kw", CASES, ids=CASE_IDS)
def test_single_item_batch_is_zero(name, kw):
    sim, rel = np.array([[0.3]], np.float32), np.array([[1.0]], np.float32)
    fn = functools.partial(BATCH_LOSSES[name], **kw)
    value, grad = jax.value_and_grad(lambda s: call(fn, name, s, jnp.asarray(rel)))(
        jnp.asarray(sim)
    )
    # ConTra's joint denominator counts the match twice (row and column): log 2 at B = 1
    want = np.log(2.0) if name == "cross_modal_nce" else 0.0
    np.testing.assert_allclose(float(value), want, rtol=1e-6)
    assert np.all(np.isfinite(grad))
    np.testing.assert_allclose(reference(name, kw, sim, rel), want, rtol=1e-12)


@pytest.mark.parametrize("name,kw", CASES, ids=CASE_IDS)
def test_two_item_batch(name, kw):
    for seed in range(3):
        sim, rel = batch(2, seed, "mixed" if seed % 2 else "one")
        assert_value(name, kw, sim, rel)


@pytest.mark.parametrize("name,kw", CASES, ids=CASE_IDS)
def test_everything_relevant(name, kw):
    sim, _ = batch(8, 11)
    rel = np.ones_like(sim)
    assert_value(name, kw, sim, rel)
    assert np.all(np.isfinite(package_grad(name, kw, sim, rel)))


def test_everything_relevant_known_values():
    sim, _ = batch(8, 11)
    rel = np.ones_like(sim)
    # No item falls below tau, so there are no negatives (and MS keeps no positive either).
    for name in ("ran", "ranp", "multi_similarity"):
        assert package(name, {}, sim, rel) == 0.0, name
    for hard in (True, False):
        np.testing.assert_allclose(
            package("relevance_margin", {"hard": hard}, sim, rel),
            package("max_margin", {"margin": 0.0, "hard": hard}, sim, rel),
            rtol=1e-6,
        )
    # W = 0 everywhere: sms only pulls pairs closer than `relax`.
    assert package("sms", {"relax": 2.0}, sim, rel) == 0.0


@pytest.mark.parametrize("name,kw", CASES, ids=CASE_IDS)
def test_no_positives(name, kw):
    sim, _ = batch(8, 12)
    rel = np.eye(8, dtype=np.float32)
    assert_value(name, kw, sim, rel)
    assert np.all(np.isfinite(package_grad(name, kw, sim, rel)))


def test_no_positives_reduces_to_simpler_losses():
    sim, _ = batch(8, 12)
    rel = np.eye(8, dtype=np.float32)
    same = [
        (("relevance_margin", {}), ("max_margin", {"margin": 1.0})),
        (("ran", {"margin": 0.3}), ("max_margin", {"margin": 0.3})),
        (("ranp", {"margin_neg": 0.3, "hard": False}), ("ran", {"margin": 0.3, "hard": False})),
        (("ranp", {}), ("max_margin", {})),
        (("adaptive_mimm", {}), ("mimm", {"margin": 0.4})),
        (("sms", {}), ("mimm", {"margin": 0.6})),  # W = 1 for every entry
    ]
    for (a, akw), (b, bkw) in same:
        np.testing.assert_allclose(
            package(a, akw, sim, rel), package(b, bkw, sim, rel), rtol=1e-6, err_msg=f"{a} {b}"
        )


@pytest.mark.parametrize("name", NAMES)
def test_jit(name):
    sim, rel = batch(8, 13, "mixed")
    args = (sim, rel) if name in RELEVANCE_NAMES else (sim,)
    got = jax.jit(BATCH_LOSSES[name])(*map(jnp.asarray, args))
    assert got.shape == () and got.dtype == jnp.float32
    np.testing.assert_allclose(float(got), reference(name, {}, sim, rel), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,kw", CASES, ids=CASE_IDS)
def test_vmap(name, kw):
    batches = [batch(8, 20 + k, "mixed" if k % 2 else "one") for k in range(2)]
    sims = np.stack([s for s, _ in batches])  # [2, B, B]
    rels = np.stack([r for _, r in batches])
    fn = functools.partial(BATCH_LOSSES[name], **kw)
    args = (sims, rels) if name in RELEVANCE_NAMES else (sims,)
    got = np.asarray(jax.vmap(fn)(*map(jnp.asarray, args)))
    want = [reference(name, kw, s, r) for s, r in batches]
    assert got.shape == (2,)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{name} {kw}")


# Runs with 8 fake CPU devices: loss and embedding gradients of sim = v @ t.T for every case in
# one jitted function, inputs sharded over a 1-D "data" mesh of 8 devices and of 1 device.
# Prints {case: {"sharded": ..., "single": ...}} as JSON.
SHARDING_SCRIPT = textwrap.dedent(
    """
    import json
    import sys

    import jax
    import numpy as np
    from jax.sharding import AxisType, NamedSharding, PartitionSpec

    from jaxsvr.losses import BATCH_LOSSES, uses_relevance

    data = np.load(sys.argv[1])
    cases = json.loads(sys.argv[2])
    assert jax.device_count() == 8, jax.devices()


    def case_loss(name, kw):
        fn = BATCH_LOSSES[name]

        def loss(v, t, rel):
            sim = v @ t.T
            return fn(sim, rel, **kw) if uses_relevance(fn) else fn(sim, **kw)

        return loss


    @jax.jit
    def step(v, t, rel):
        return {
            key: jax.value_and_grad(case_loss(name, kw), argnums=(0, 1))(v, t, rel)
            for key, (name, kw) in cases.items()
        }


    def run(devices):
        mesh = jax.make_mesh(
            (len(devices),), ("data",), axis_types=(AxisType.Auto,), devices=devices
        )
        rows = NamedSharding(mesh, PartitionSpec("data"))
        v, t, rel = (jax.device_put(data[k], rows) for k in ("video", "text", "rel"))
        out = step(v, t, rel)
        return {
            key: {
                "n_devices": len(v.sharding.device_set),
                "value": float(value),
                "grad_video": np.asarray(gv).tolist(),
                "grad_text": np.asarray(gt).tolist(),
            }
            for key, (value, (gv, gt)) in out.items()
        }


    sharded, single = run(jax.devices()), run(jax.devices()[:1])
    print(json.dumps({key: {"sharded": sharded[key], "single": single[key]} for key in cases}))
    """
)
SHARDING_CASES = {f"{name}{kw}": (name, kw) for name, kw in CORE_CASES}


def sharding_data() -> dict[str, np.ndarray]:
    """Unit video / text embeddings [16, 8] and a relevance [16, 16]."""
    rng = np.random.default_rng(30)
    b, d = 16, 8
    video, text = (rng.normal(size=(b, d)) for _ in range(2))
    video = (video / np.linalg.norm(video, axis=1, keepdims=True)).astype(np.float32)
    text = (text / np.linalg.norm(text, axis=1, keepdims=True)).astype(np.float32)
    return {"video": video, "text": text, "rel": batch(b, 31, "mixed")[1]}


@pytest.fixture(scope="module", autouse=True)
def sharding_process(request, tmp_path_factory):
    """Starts the 8-device subprocess before this module's first test so it runs beside them.

    Yields the Popen, or None when the sharding test is not selected.
    """
    if not any(item.name == "test_sharded_matches_single_device" for item in request.session.items):
        yield None
        return
    path = tmp_path_factory.mktemp("sharding") / "data.npz"
    np.savez(path, **sharding_data())
    # LLVM optimisation level 0 halves the compile time; both meshes compile with it.
    flags = "--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0"
    flags = f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip()  # conftest's, and these
    env = dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu")  # fake devices: CPU only
    proc = subprocess.Popen(
        [sys.executable, "-c", SHARDING_SCRIPT, str(path), json.dumps(SHARDING_CASES)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
    )
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def test_sharded_matches_single_device(sharding_process):
    try:
        stdout, stderr = sharding_process.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("the 8-device subprocess did not finish in 180 s")
    assert sharding_process.returncode == 0, stderr[-3000:]
    result = json.loads(stdout.strip().splitlines()[-1])

    assert set(result) == set(SHARDING_CASES)
    data = sharding_data()
    sim = data["video"].astype(np.float64) @ data["text"].astype(np.float64).T
    for key, (name, kw) in SHARDING_CASES.items():
        sharded, single = result[key]["sharded"], result[key]["single"]
        assert (sharded["n_devices"], single["n_devices"]) == (8, 1), key
        np.testing.assert_allclose(
            sharded["value"], single["value"], rtol=1e-5, atol=1e-6, err_msg=key
        )
        want = reference(name, kw, sim, data["rel"])
        np.testing.assert_allclose(single["value"], want, rtol=1e-5, atol=1e-6, err_msg=key)
        for g in ("grad_video", "grad_text"):
            np.testing.assert_allclose(
                sharded[g], single[g], rtol=1e-4, atol=1e-6, err_msg=f"{key} {g}"
            )


def test_bad_shapes_are_one_line_errors():
    sim = np.zeros((4, 5), np.float32)
    for fn in BATCH_LOSSES.values():
        args = (sim, np.zeros((4, 5), np.float32)) if uses_relevance(fn) else (sim,)
        with pytest.raises(ValueError, match="square"):
            fn(*args)
        if uses_relevance(fn):
            with pytest.raises(ValueError, match="shape of sim"):
                fn(np.zeros((4, 4), np.float32), np.zeros((4, 3), np.float32))
