"""What batch mining picks: the relevance of the hardest negatives during training (the
RANP paper's Fig. 2: "Learning video retrieval models with relevance-aware online mining",
Falcon et al. ICIAP 2022), with a plot.

`mined_negative_relevance(config, epochs=1)` trains `config` (a batch loss: max_margin,
ran, ranp, ...) from scratch for `epochs` epochs with the trainer's own step, and before
each update records, for every anchor of the batch in both directions, the relevance of
its hardest negative: the item the mining picks, the highest-scoring other item, among
those below tau when the loss has RAN's tau (`losses.mining.hardest_negative_relevance`).
The scores are those the loss sees (same parameters, same dropout keys); the relevance is
the batch's, at the loss's first weighted level. Run it on a config with hard mining and
on the same config with `ran` to see the highly relevant "negatives" RAN leaves out.

`plot_mined_relevance({name: values}, bins)` draws their distributions. Nothing is written:
the training here is only the means of recording (no workdir, no checkpoint).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import jax
import ml_collections
import numpy as np

from jaxsvr.errors import InputError
from jaxsvr.inputs.model_inputs import gather_device
from jaxsvr.losses import mining
from jaxsvr.objectives.base import embed
from jaxsvr.objectives.batch import BatchObjective
from jaxsvr.relevance.analysis import pyplot
from jaxsvr.runtime import parallel, precision
from jaxsvr.train import batches, checks, loop, optim, pipeline


def mined_negative_relevance(config: ml_collections.ConfigDict, epochs: int = 1) -> np.ndarray:
    """[steps, 2, B] relevance of each anchor's hardest negative over `epochs` epochs
    (module docstring); NaN where an anchor has no valid negative.

    Raises:
      InputError: the config's loss is not a batch loss.
    """
    checks.check_train(config)
    mesh = parallel.make_mesh(config.mesh.data)
    run = pipeline.build(config)
    objective, model = run.objective, run.model
    if not isinstance(objective, BatchObjective):
        raise InputError(
            f"loss {config.loss.name!r} mines no batch negatives: use a batch loss "
            "(max_margin, ran, ranp, relevance_margin, ...)"
        )
    batch_size = config.train.batch_size
    steps_per_epoch = objective.steps_per_epoch(batch_size)
    total = config.train.max_steps or config.train.num_epochs * steps_per_epoch
    tx = optim.build(config.optimizer, total)  # the schedule of the whole run
    rep = parallel.replicated(mesh)
    state = loop.init_state(config, model, tx, run, rep)
    tables = run.train_inputs.device_tables(rep)
    source = batches.BatchSource(objective, run.train_inputs, batch_size, steps_per_epoch, "device")
    # RAN's tau as an argument, not a constant of the program: one compile serves a config
    # and its variants with another tau or none (hard mining's pool, every other item, is
    # the items below +inf: relevances are finite).
    tau = objective.kwargs.get("tau")
    tau = np.float32(np.inf if tau is None else tau)
    level = 0  # the first weighted level, as in the loss's batch["rel"][:, i, :]

    @jax.jit
    @functools.partial(precision.traced_under, config.matmul_precision)  # as the trainer
    def picked(state, tables, batch, tau):
        rng = jax.random.fold_in(jax.random.key(config.seed), state.step)  # the step's keys
        inputs = gather_device(tables, objective.gathers, batch)
        video, text = embed(model, state.params, inputs, rng)
        sims = model.apply(state.params, video, text, method=model.similarity)
        sim = sims[objective.levels[level]]
        return mining.hardest_negative_relevance(sim, batch["rel"][:, level, :], tau)

    step_program = jax.jit(
        precision.traced_under(
            config.matmul_precision,
            functools.partial(
                loop.train_step, model=model, tx=tx, objective=objective, seed=config.seed
            ),
        )
    )
    out = []
    for step in range(1, epochs * steps_per_epoch + 1):
        batch = parallel.global_batch(source(step), mesh)
        out.append(np.asarray(jax.device_get(picked(state, tables, batch, tau))))
        state, _ = step_program(state, tables, batch)
    return np.stack(out)


def plot_mined_relevance(values: Mapping[str, np.ndarray], bins: int = 20, ax=None):
    """Histograms (fractions of the picked negatives) of relevance values, one line per
    name; NaNs (anchors without a negative) are left out."""
    values = {k: np.asarray(v, np.float64).ravel() for k, v in values.items()}
    values = {k: v[np.isfinite(v)] for k, v in values.items()}
    edges = np.linspace(0.0, 1.0, bins + 1)
    return plot_fractions(
        values, edges, "relevance of the hardest negative", "fraction of anchors", ax
    )


def plot_fractions(values: Mapping[str, np.ndarray], edges, xlabel: str, ylabel: str, ax=None):
    """One line per name: the fraction of its values in each bin of `edges`."""
    if ax is None:
        _, ax = pyplot().subplots(figsize=(5, 3.5))
    centres = (edges[:-1] + edges[1:]) / 2
    for name, v in values.items():
        counts = np.histogram(v, bins=edges)[0]
        ax.plot(centres, counts / max(np.size(v), 1), marker=".", label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend()
    return ax
