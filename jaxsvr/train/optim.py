"""optax optimisers and learning-rate schedules from `config.optimizer`.

Keys: `name` (sgd | adam | adamw), `lr`, `momentum` (sgd), `weight_decay` (adamw),
`schedule` (constant | cosine | warmup_linear: linear warm-up over `warmup_steps`, or
over `warmup_fraction` of the run when that is > 0, then linear decay to 0 |
warmup_cosine: the same warm-up, then cosine decay to the floor `final_lr`, the recipe of
the SMS paper's ensemble members), `grad_clip` (global norm; 0 = off). Published
JPoSE/MME: SGD, lr 0.01, momentum 0.9; ConTra: Adam 1e-4, warmup_linear.
`jaxsvr.train.checks` checks every key (names against `NAMES` and `SCHEDULES`) before a
run reads any data. `gradient_norm` is the train step's logged `grad_norm`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import ml_collections
import optax

# config.optimizer.name -> (learning-rate schedule, config.optimizer) -> optax optimiser
OPTIMIZERS = {
    "sgd": lambda lr, c: optax.sgd(lr, momentum=c.momentum or None),
    "adam": lambda lr, c: optax.adam(lr),
    "adamw": lambda lr, c: optax.adamw(lr, weight_decay=c.weight_decay),
}
NAMES = tuple(OPTIMIZERS)
SCHEDULES = ("constant", "cosine", "warmup_linear", "warmup_cosine")


def schedule(config: ml_collections.ConfigDict, total_steps: int) -> optax.Schedule:
    """The learning rate per step of `config.schedule` over a run of `total_steps`."""
    kind = config.schedule
    if kind == "constant":
        return optax.constant_schedule(config.lr)
    if kind == "cosine":
        return optax.cosine_decay_schedule(config.lr, max(total_steps, 1))
    warm = config.warmup_steps
    if config.warmup_fraction > 0:
        warm = round(config.warmup_fraction * total_steps)
    warm = min(warm, total_steps)
    if kind == "warmup_cosine":
        return optax.warmup_cosine_decay_schedule(
            0.0, config.lr, max(warm, 1), max(total_steps, warm + 1), end_value=config.final_lr
        )
    return optax.join_schedules(  # warmup_linear
        [
            optax.linear_schedule(0.0, config.lr, max(warm, 1)),
            optax.linear_schedule(config.lr, 0.0, max(total_steps - warm, 1)),
        ],
        [warm],
    )


def build(config: ml_collections.ConfigDict, total_steps: int) -> optax.GradientTransformation:
    """The optimiser named by `config.name` with its schedule."""
    opt = OPTIMIZERS[config.name](schedule(config, total_steps), config)
    if config.grad_clip:
        opt = optax.chain(optax.clip_by_global_norm(config.grad_clip), opt)
    return opt


def gradient_norm(grads: Any) -> jax.Array:
    """The global L2 norm of `grads` (the logged `grad_norm`), each array read once.

    `optax.tree.norm(grads)` squares every gradient as Adam's second moment squares it, and
    XLA merges the two squares into one value: on the CPU the square of each array is then
    written out and reduced in a pass of its own, besides the moment's pass (1.5–2 ms of
    the SMS heads' 21 ms step, docs/benchmarks.md). Behind `optimization_barrier` the
    norm's squares are its own, so each array's sum of squares reads the gradient once
    and the moment squares it in its own pass. The value is optax's up to the order of the
    sums; a zero gradient gives exactly 0 (the vanishing-gradient warning's test).
    The gradients are real floats (jaxsvr's parameters all are).
    """
    leaves = jax.lax.optimization_barrier(jax.tree.leaves(grads))
    return jnp.sqrt(sum((jnp.sum(jnp.square(g)) for g in leaves), jnp.zeros((), jnp.float32)))
