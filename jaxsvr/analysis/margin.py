"""The margins a triplet loss uses during one epoch, with a plot: the relevance-margin
paper's histogram of the margins actually used ("Relevance-based Margin for
Contrastively-trained Video Retrieval Models", Falcon et al. ICMR 2022).

`triplet_margins(config, epoch=0)`: {level: [triplets]} the margin of every triplet the
sampler draws in `epoch`, every batch of the epoch, as the train step receives them (the
`margin` array of `TripletObjective.host_batch`). No training is needed: the triplets are
a pure function of (seed, epoch, step) and a relevance margin, 1 - R(anchor, negative),
depends on the sampled negative only (`jaxsvr.sampling.triplets`). With a fixed margin
every value is `config.loss.fixed_margin`.

`plot_margins({name: margins}, bins)` draws their distributions (fractions of triplets).
"""

from __future__ import annotations

from collections.abc import Mapping

import ml_collections
import numpy as np

from jaxsvr.analysis.mining import plot_fractions
from jaxsvr.errors import InputError
from jaxsvr.objectives.triplet import TripletObjective
from jaxsvr.train import checks, pipeline


def triplet_margins(config: ml_collections.ConfigDict, epoch: int = 0) -> dict[str, np.ndarray]:
    """{level: [anchors x K] float32 margins} of the triplets of `epoch` (module docstring).

    Raises:
      InputError: the config's loss is not the triplet loss.
    """
    checks.check_train(config)
    run = pipeline.build(config)
    objective = run.objective
    if not isinstance(objective, TripletObjective):
        raise InputError(
            f"loss {config.loss.name!r} samples no triplets: use loss.name='triplet' (MME, JPoSE)"
        )
    batch_size = config.train.batch_size
    slots = {level: objective.sampler.layout.slot(level) for level in objective.levels}
    parts: dict[str, list[np.ndarray]] = {level: [] for level in slots}
    for step in range(objective.steps_per_epoch(batch_size)):
        margin = objective.host_batch(epoch, step, batch_size)["margin"]
        for level, slot in slots.items():
            parts[level].append(margin[:, slot].ravel())
    return {level: np.concatenate(values) for level, values in parts.items()}


def plot_margins(values: Mapping[str, np.ndarray], bins: int = 20, ax=None):
    """Histograms (fractions of the triplets) of margins, one line per name."""
    values = {k: np.asarray(v, np.float64).ravel() for k, v in values.items()}
    top = max([1.0, *(float(v.max()) for v in values.values() if v.size)])
    edges = np.linspace(0.0, top, bins + 1)
    return plot_fractions(values, edges, "margin of the triplet", "fraction of triplets", ax)
