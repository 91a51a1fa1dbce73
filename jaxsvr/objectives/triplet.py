"""`TripletObjective`: offline triplets with fixed or relevance margins (JPoSE / MME).

Triplets come from `jaxsvr.sampling.triplets` (JPoSE/MME), fixed or relevance margins,
four pair types per level (`jaxsvr.losses.triplet`); the batch rows and the loss share one
`TripletLayout`. Models whose score is not a dot product (HGR) have no within-modality
score, so only the two cross-modal pair types (text-video, video-text) are used for them
(logged). `config.sampler.positives` picks the action-level positives: `class` (the same
action), `instance` (only the clip itself) or `proxy` (S >= `config.sampler.threshold`
under the run's relevance, `jaxsvr.relevance.split_relevance`).
"""

from __future__ import annotations

import logging

import jax
import numpy as np

from jaxsvr.errors import InputError
from jaxsvr.losses.triplet import DISTANCES, PAIR_TYPES, triplet_terms
from jaxsvr.objectives.base import Gather, embed, weighted_levels
from jaxsvr.relevance import split_relevance
from jaxsvr.relevance.split_relevance import RelevanceSpec
from jaxsvr.sampling import triplets

SAMPLER_POSITIVES = ("class", "instance", "proxy")  # config.sampler.positives


def semantic_positives(config, clips, relevance: RelevanceSpec):
    """The triplet sampler's action-level positives for `config.sampler.positives`."""
    kind = config.sampler.positives
    if kind not in SAMPLER_POSITIVES:
        raise InputError(
            f"unknown config.sampler.positives {kind!r}: use one of {SAMPLER_POSITIVES}"
        )
    if kind == "class":
        return None
    n = len(clips)
    if kind == "instance":  # each clip's only positive is itself
        return np.arange(n + 1, dtype=np.int64), np.arange(n, dtype=np.int32)
    return split_relevance.semantic_positives(relevance, clips, config.sampler.threshold)


class TripletObjective:
    """Offline triplets with fixed or relevance margins (JPoSE / MME)."""

    batch_keys = ("rows", "margin")  # [B, M] row indices, [B, n_levels, K] margins

    def __init__(self, config, train_split, model, relevance: RelevanceSpec):
        lo = config.loss
        if lo.distance not in DISTANCES:
            raise InputError(
                f"unknown config.loss.distance {lo.distance!r}: use one of {DISTANCES}"
            )
        unknown = set(lo.pair_weights) - set(PAIR_TYPES)
        if unknown:
            raise InputError(
                f"unknown pair types {sorted(unknown)} in config.loss.pair_weights: use "
                f"{sorted(PAIR_TYPES)}"
            )
        if config.sampler.pairing != "own":
            raise InputError(
                f"config.sampler.pairing={config.sampler.pairing!r} is for batch losses; the "
                "triplet loss samples its own positives: set it to 'own'"
            )
        self.levels = weighted_levels(config, model, triplets.LEVELS)
        self.pair_types = tuple(p for p in PAIR_TYPES if lo.pair_weights[p] > 0)
        if not model.dot_product:
            cross = tuple(p for p in self.pair_types if PAIR_TYPES[p][0] != PAIR_TYPES[p][1])
            if cross != self.pair_types:
                logging.info(
                    "triplet loss: model %s scores video-text pairs only; pair types %s",
                    config.model.name,
                    ", ".join(cross),
                )
            self.pair_types = cross
        if not self.pair_types:
            raise InputError(
                "every triplet pair type has weight 0 in config.loss.pair_weights: give one "
                f"of {sorted(PAIR_TYPES)} a positive weight"
            )
        self.sampler = triplets.TripletSampler(
            train_split.verbs,
            train_split.clips.noun_classes,
            train_split.clips.noun_class,
            levels=self.levels,
            num_triplets=config.sampler.num_triplets,
            resample_every=config.sampler.resample_every,
            margin=lo.margin,
            fixed_margin=lo.fixed_margin,
            seed=config.seed,
            semantic=semantic_positives(config, train_split.clips, relevance),
        )
        self.gathers = {k: Gather(k, "rows") for k in ("video", *model.text_fields)}
        self.weights = {
            f"{lv}_{p}": lo.level_weights[lv] * lo.pair_weights[p]
            for lv in self.levels
            for p in self.pair_types
        }
        self.distance = lo.distance

    @property
    def rows_per_anchor(self) -> int:
        return self.sampler.rows_per_anchor

    def steps_per_epoch(self, batch_size: int) -> int:
        return self.sampler.steps_per_epoch(batch_size)

    def host_batch(self, epoch: int, step: int, batch_size: int, share: slice = slice(None)):
        rows, margin = self.sampler.batch(epoch, step, batch_size, share)
        return {"rows": rows, "margin": margin}

    def loss(self, model, params, inputs: dict, batch: dict, rng):
        b, m = batch["rows"].shape
        video, text = embed(model, params, inputs, rng)
        video, text = jax.tree.map(lambda e: e.reshape(b, m, *e.shape[1:]), (video, text))

        def pair_score(v, t):
            return model.apply(params, v, t, method=model.pair_similarity)

        terms = triplet_terms(
            video,
            text,
            batch["margin"],
            levels=self.levels,
            layout=self.sampler.layout,
            distance_kind=self.distance,
            pair_types=self.pair_types,
            pair_score=None if model.dot_product else pair_score,
        )
        return sum(w * terms[k] for k, w in self.weights.items()), terms
