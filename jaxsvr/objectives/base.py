"""What the trainer asks of an objective (`Objective`), and the helpers objectives share.

An objective is what a train step optimises: it owns its sampler (`jaxsvr.sampling`),
builds host-side batches, and computes the loss over a model's scores. The trainer and the
input pipeline use exactly the members of `Objective`; `jaxsvr.objectives` maps each
`config.loss.name` to the class that implements it.

Each level the model has and `config.loss.level_weights` weighs above zero gets a term;
the total is the weighted sum.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import numpy as np

from jaxsvr.errors import InputError


class Gather(NamedTuple):
    """Rows `batch[rows]` of the training table `table` (`video` or a text field of the
    model) become one model input (`jaxsvr.inputs.model_inputs`)."""

    table: str
    rows: str


@runtime_checkable
class Objective(Protocol):
    """The members the trainer and the input pipeline use."""

    batch_keys: tuple[str, ...]  # the arrays of `host_batch`, batch on the first axis
    rows_per_anchor: int  # rows each anchor brings to a batch (for the log)
    gathers: dict[str, Gather]  # {model input name: the table rows it takes}
    # the config.sampler.pairing values it trains with (`jaxsvr.train.checks`, before data)
    pairings: tuple[str, ...]

    def steps_per_epoch(self, batch_size: int) -> int:
        """Batches in one epoch (the last partial batch is dropped)."""
        ...

    def host_batch(
        self, epoch: int, step: int, batch_size: int, share: slice = slice(None)
    ) -> dict[str, np.ndarray]:
        """Rows `share` of batch `step` of `epoch` (one process's share; all by default):
        NumPy arrays keyed by `batch_keys`, a pure function of (seed, epoch, step), so the
        shares of all processes concatenate to the whole batch. Only the share's rows are
        built where that saves work (relevance rows, gathered inputs)."""
        ...

    def loss(self, model, params, inputs: dict, batch: dict, rng) -> tuple[Any, dict]:
        """(total, {term: scalar}), traced inside the jitted train step; `inputs` are the
        gathered rows (`gathers`), flattened to [rows, ...]."""
        ...


def weighted_levels(config, model, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """The model's levels with a positive weight; an error for one the objective lacks."""
    weights = config.loss.level_weights
    missing = [lv for lv in model.levels if lv not in weights]
    if missing:
        raise InputError(f"config.loss.level_weights has no weight for level {missing[0]!r}")
    levels = tuple(lv for lv in model.levels if weights[lv] > 0)
    if not levels:
        raise InputError(
            f"every level of model {config.model.name!r} {model.levels} has weight 0 in "
            "config.loss.level_weights: give one a positive weight"
        )
    bad = [lv for lv in levels if lv not in allowed]
    if bad:
        raise InputError(
            f"level {bad[0]!r} cannot be trained with loss {config.loss.name!r}: set "
            f"config.loss.level_weights.{bad[0]}=0"
        )
    return levels


def model_inputs(model, inputs: dict) -> dict:
    """The model's inputs (`video` and its text fields) among the gathered ones."""
    return {k: inputs[k] for k in ("video", *model.text_fields)}


def embed(model, params, inputs: dict, rng) -> tuple[Any, Any]:
    """Both modalities in training mode. Each `apply` restarts flax's rng counters, so the
    two get separate dropout keys (one key would give a module shared by both methods, like
    HGR's dropout, the same mask in each)."""
    video_rng, text_rng = jax.random.split(rng)
    video = model.apply(params, inputs, True, method=model.embed_video, rngs={"dropout": video_rng})
    text = model.apply(params, inputs, True, method=model.embed_text, rngs={"dropout": text_rng})
    return video, text
