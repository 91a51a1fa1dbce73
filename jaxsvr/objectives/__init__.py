"""Stage 7 — objectives: what a train step optimises, looked up by `config.loss.name`.

Every loss works with every model (`Objective`, `base.py`, is what the trainer uses):
- `triplet` (`triplet.TripletObjective`): offline triplets, fixed or relevance margins
  (JPoSE / MME);
- `contra` (`contra.ContraObjective`): ConTra's CML + NEI + UNI over (video, caption)
  pairs with temporal neighbours;
- every batch loss of `jaxsvr.losses.BATCH_LOSSES` (`batch.BatchObjective`): [B, B] scores
  per level with the loss's keywords from `config.loss.<name>`.

A new objective is a class in its own module here with the members of `Objective`, and one
entry in `OBJECTIVES`. `jaxsvr.train.checks` checks `config.loss.name` against `NAMES`, and
`config.sampler.pairing` against the class's `pairings`, before any data is read.
"""

from __future__ import annotations

import ml_collections

from jaxsvr import losses
from jaxsvr.objectives.base import Gather, Objective
from jaxsvr.objectives.batch import BatchObjective
from jaxsvr.objectives.contra import ContraObjective
from jaxsvr.objectives.triplet import SAMPLER_POSITIVES, TripletObjective
from jaxsvr.relevance.split_relevance import RelevanceSpec

# config.loss.name -> the objective class
OBJECTIVES: dict[str, type] = {
    "triplet": TripletObjective,
    "contra": ContraObjective,
    **dict.fromkeys(losses.BATCH_LOSSES, BatchObjective),
}
NAMES = tuple(OBJECTIVES)


def build(
    config: ml_collections.ConfigDict, train_split, model, relevance: RelevanceSpec
) -> Objective:
    """The objective `config.loss.name` names, for `model` on the training split.

    Args:
      relevance: the run's relevance (semantic triplet positives score by it).
    """
    return OBJECTIVES[config.loss.name](config, train_split, model, relevance)


__all__ = [
    "NAMES",
    "OBJECTIVES",
    "SAMPLER_POSITIVES",
    "BatchObjective",
    "ContraObjective",
    "Gather",
    "Objective",
    "TripletObjective",
    "build",
]
