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
from jaxsvr.losses.triplet import PAIR_TYPES, level_terms, triplet_terms
from jaxsvr.objectives.base import Gather, embed, weighted_levels
from jaxsvr.relevance import split_relevance
from jaxsvr.relevance.split_relevance import RelevanceSpec
from jaxsvr.sampling import triplets
from jaxsvr.sampling.triplets import TripletLayout

SAMPLER_POSITIVES = ("class", "instance", "proxy")  # config.sampler.positives


def semantic_positives(config, clips, relevance: RelevanceSpec):
    """The triplet sampler's action-level positives for `config.sampler.positives`."""
    kind = config.sampler.positives
    if kind == "class":
        return None
    n = len(clips)
    if kind == "instance":  # each clip's only positive is itself
        return np.arange(n + 1, dtype=np.int64), np.arange(n, dtype=np.int32)
    return split_relevance.semantic_positives(relevance, clips, config.sampler.threshold)


class TripletObjective:
    """Offline triplets with fixed or relevance margins (JPoSE / MME)."""

    # [B, M] row indices, [B, n_levels, K] margins; dot-product models also get each row
    # group's indices (`rows_0`, `rows_1`, ...: the columns of `row_groups`)
    batch_keys: tuple[str, ...] = ("rows", "margin")
    pairings = ("own",)  # the sampler draws its own positives

    def __init__(self, config, train_split, model, relevance: RelevanceSpec):
        lo = config.loss
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
        fields = ("video", *model.text_fields)
        layout = self.sampler.layout
        if model.dot_product:
            self.groups = row_groups(layout, self.levels)
            self.batch_keys = ("rows", "margin", *(f"rows_{g}" for g in range(len(self.groups))))
            self.gathers = {
                f"{f}_{g}": Gather(f, f"rows_{g}") for g in range(len(self.groups)) for f in fields
            }
        else:
            self.groups = None
            self.gathers = {f: Gather(f, "rows") for f in fields}
        self.fields = fields
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
        batch = {"rows": rows, "margin": margin}
        for g, (cols, _) in enumerate(self.groups or ()):
            batch[f"rows_{g}"] = rows[:, cols]  # a copy: cols is an index array
        return batch

    def loss(self, model, params, inputs: dict, batch: dict, rng):
        if model.dot_product:
            terms = self._grouped_terms(model, params, inputs, batch["margin"], rng)
            return sum(w * terms[k] for k, w in self.weights.items()), terms
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
            pair_score=pair_score,
        )
        return sum(w * terms[k] for k, w in self.weights.items()), terms

    def _grouped_terms(self, model, params, inputs: dict, margin, rng) -> dict:
        """The triplet terms from each row group (`row_groups`) embedded on its own (XLA
        drops the branches a group's outputs do not feed). Each group draws its own
        dropout key."""
        b = margin.shape[0]
        embedded = []
        for g, (cols, _) in enumerate(self.groups):
            sub = {f: inputs[f"{f}_{g}"] for f in self.fields}
            video, text = embed(model, params, sub, jax.random.fold_in(rng, g))
            embedded.append(
                jax.tree.map(lambda e, n=cols.size: e.reshape(b, n, *e.shape[1:]), (video, text))
            )
        anchors = {"video": embedded[0][0], "text": embedded[0][1]}  # column 0 of group 0
        layout, terms = self.sampler.layout, {}
        for g, ((video, text), (_, level)) in enumerate(zip(embedded, self.groups)):
            if level is None:  # group 0 holding the anchors alone
                continue
            first = 1 if g == 0 else 0  # group 0: the level's rows come after the anchor
            terms |= level_terms(
                level,
                {m: e[level][:, 0] for m, e in anchors.items()},
                {"video": video[level][:, first:], "text": text[level][:, first:]},
                margin[:, layout.slot(level)],
                distance_kind=self.distance,
                pair_types=self.pair_types,
            )
        return terms


def row_groups(layout: TripletLayout, levels: tuple[str, ...]) -> list[tuple[np.ndarray, str]]:
    """[(columns, level)]: the row groups of a triplet batch that a dot-product model embeds
    one by one. A level's K positives and K negatives feed that level alone; the anchors
    feed every level, so they join the action level's rows (which need both of JPoSE's
    branches anyway: no extra work, and no tiny product of B rows), or form group 0 of
    their own (level None) when no action level is trained. Each group is gathered and
    embedded on its own, so a verb row never passes through the noun branch: 2/3 of
    JPoSE's dense work of embedding every row for every level."""

    def cols(level: str) -> np.ndarray:
        return np.arange(layout.positives(level).start, layout.negatives(level).stop)

    first = "action" if "action" in levels else None
    anchor = np.array([TripletLayout.ANCHOR])
    groups = [(np.concatenate([anchor, cols(first)]) if first else anchor, first)]
    return groups + [(cols(level), level) for level in levels if level != first]
