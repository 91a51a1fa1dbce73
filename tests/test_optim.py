"""Learning-rate schedules: linear warm-up then linear or cosine decay, by steps or by a share
of the run; the train step's gradient norm."""

import functools
import types

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import linen as nn

from jaxsvr import configs
from jaxsvr.errors import InputError
from jaxsvr.train import checks, loop, optim


def schedule(**kw):
    c = configs.base().optimizer
    c.update(lr=1.0, schedule="warmup_linear")
    c.update(**kw)
    return optim.schedule(c, total_steps=100)


def test_warmup_steps_then_linear_decay():
    lr = schedule(warmup_steps=20)
    assert [float(lr(s)) for s in (0, 10, 20, 60, 100)] == pytest.approx([0, 0.5, 1, 0.5, 0])


def test_warmup_fraction_overrides_steps():
    lr = schedule(warmup_steps=50, warmup_fraction=0.1)  # 10 of 100 steps
    assert [float(lr(s)) for s in (5, 10, 55, 100)] == pytest.approx([0.5, 1, 0.5, 0])


def test_constant_and_unknown():
    c = configs.base()
    assert float(optim.schedule(c.optimizer, 10)(7)) == pytest.approx(c.optimizer.lr)
    c.optimizer.schedule = "step"  # checked with the config, before any data
    with pytest.raises(InputError, match="unknown config.optimizer.schedule 'step'"):
        checks.check_train(c)


def test_warmup_then_cosine_to_a_floor():
    # 20 warm-up steps of 100, then a cosine from 1 to 0.1: halfway (step 60) at 0.55
    lr = schedule(schedule="warmup_cosine", warmup_fraction=0.2, final_lr=0.1)
    got = [float(lr(s)) for s in (0, 10, 20, 60, 100, 150)]
    assert got == pytest.approx([0, 0.5, 1, 0.55, 0.1, 0.1])
    c = configs.base()
    c.optimizer.update(lr=1.0, schedule="warmup_cosine", final_lr=2.0)
    with pytest.raises(InputError, match="final_lr = 2.0 is above"):
        checks.check_train(c)


def test_gradient_norm():
    rng = np.random.default_rng(0)
    tree = {
        "kernel": rng.standard_normal((300, 257)).astype(np.float32),
        "bias": rng.standard_normal(257).astype(np.float32) * 1e-3,
        "scalar": np.float32(-2.5),
    }
    want = np.sqrt(sum(np.sum(np.float64(x) ** 2) for x in tree.values()))
    got = jax.jit(optim.gradient_norm)(jax.tree.map(jnp.asarray, tree))
    assert got.dtype == jnp.float32 and float(got) == pytest.approx(want, rel=1e-6)
    zeros = jax.tree.map(lambda x: jnp.zeros(np.shape(x)), tree)
    assert float(jax.jit(optim.gradient_norm)(zeros)) == 0.0  # exactly: the warning's test
    assert float(optim.gradient_norm({})) == 0.0
    for bad in (np.nan, np.inf):
        assert not np.isfinite(float(optim.gradient_norm({**tree, "bias": np.full(3, bad)})))


def test_gradient_norm_reads_each_gradient_once():
    # Adam squares each gradient too; optimized as a user's step is (tests/conftest.py turns
    # optimizations off), optax's norm shares that square, which then becomes an array of
    # its own on the CPU: the step writes one [600, 512] array more (mu, g * g, nu, params)
    def step(norm, params, grads, state):
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state, norm(grads)

    tx = optax.adamw(1e-3, weight_decay=1e-4)
    params = {"w": jnp.ones((600, 512)), "b": jnp.ones(512)}
    grads = jax.tree.map(lambda x: x * 1e-3, params)
    previous = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", False)
    try:
        written = {}
        for name, norm in (("optax", optax.tree.norm), ("jaxsvr", optim.gradient_norm)):
            fn = jax.jit(functools.partial(step, norm))
            text = fn.lower(params, grads, tx.init(params)).compile().as_text()
            entry = text[text.index("ENTRY") :].splitlines()[1:]
            written[name] = sum(
                " = f32[600,512]" in line for line in entry if "parameter(" not in line
            )
            assert float(fn(params, grads, tx.init(params))[2]) == pytest.approx(
                np.sqrt(600 * 512 + 512) * 1e-3, rel=1e-6
            )
    finally:
        jax.config.update("jax_disable_most_optimizations", previous)
    if jax.default_backend() == "cpu":  # at most mu, nu and the parameters (optax's: 4 here)
        assert written["jaxsvr"] <= min(3, written["optax"]), written


def test_the_train_step_logs_this_norm():
    # a one-layer model and a squared loss through the trainer's own step
    model = nn.Dense(4)
    x = np.random.default_rng(1).standard_normal((8, 3)).astype(np.float32)
    params = model.init(jax.random.key(0), x)
    objective = types.SimpleNamespace(
        gathers={},
        loss=lambda model, params, inputs, batch, rng: (
            jnp.sum(model.apply(params, batch["x"]) ** 2),
            {},
        ),
    )
    tx = optax.adam(1e-3)
    state = loop.TrainState(jnp.int32(0), params, tx.init(params))
    step = jax.jit(
        functools.partial(loop.train_step, model=model, tx=tx, objective=objective, seed=0)
    )
    batch = {"x": jnp.asarray(x)}
    assert "optimization_barrier" in step.lower(state, {}, batch).as_text()
    grads = jax.grad(lambda p: jnp.sum(model.apply(p, x) ** 2))(params)
    metrics = step(state, {}, batch)[1]
    assert float(metrics["grad_norm"]) == pytest.approx(float(optax.tree.norm(grads)), rel=1e-6)
