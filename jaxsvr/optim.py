"""optax optimisers and learning-rate schedules from `config.optimizer`.

Keys: `name` (sgd | adam | adamw), `lr`, `momentum` (sgd), `weight_decay` (adamw),
`schedule` (constant | cosine | warmup_linear: linear warm-up over `warmup_steps`, or
over `warmup_fraction` of the run when that is > 0, then linear decay to 0), `grad_clip`
(global norm; 0 = off). Published JPoSE/MME: SGD, lr 0.01, momentum 0.9; ConTra: Adam
1e-4, warmup_linear.
"""

from __future__ import annotations

import ml_collections
import optax

from jaxsvr.errors import InputError

# config.optimizer.name -> (learning-rate schedule, config.optimizer) -> optax optimiser
OPTIMIZERS = {
    "sgd": lambda lr, c: optax.sgd(lr, momentum=c.momentum or None),
    "adam": lambda lr, c: optax.adam(lr),
    "adamw": lambda lr, c: optax.adamw(lr, weight_decay=c.weight_decay),
}
NAMES = tuple(OPTIMIZERS)
SCHEDULES = ("constant", "cosine", "warmup_linear")


def schedule(config: ml_collections.ConfigDict, total_steps: int) -> optax.Schedule:
    kind = config.schedule
    if kind == "constant":
        return optax.constant_schedule(config.lr)
    if kind == "cosine":
        return optax.cosine_decay_schedule(config.lr, max(total_steps, 1))
    if kind == "warmup_linear":
        warm = config.warmup_steps
        if config.warmup_fraction > 0:
            warm = round(config.warmup_fraction * total_steps)
        warm = min(warm, total_steps)
        return optax.join_schedules(
            [
                optax.linear_schedule(0.0, config.lr, max(warm, 1)),
                optax.linear_schedule(config.lr, 0.0, max(total_steps - warm, 1)),
            ],
            [warm],
        )
    raise InputError(f"unknown config.optimizer.schedule {kind!r}: use one of {SCHEDULES}")


def build(config: ml_collections.ConfigDict, total_steps: int) -> optax.GradientTransformation:
    """The optimiser named by `config.name` with its schedule."""
    if config.name not in OPTIMIZERS:
        raise InputError(f"unknown config.optimizer.name {config.name!r}: use one of {NAMES}")
    opt = OPTIMIZERS[config.name](schedule(config, total_steps), config)
    if config.grad_clip:
        opt = optax.chain(optax.clip_by_global_norm(config.grad_clip), opt)
    return opt
