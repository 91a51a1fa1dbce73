"""Offline triplet sampling for JPoSE/MME, host-side NumPy, a pure function of (seed, epoch).

JPoSE (Wray et al., ICCV 2019) trains on triplets sampled ahead of time: for every anchor
clip, `num_triplets` (10) positives and negatives per embedding level, redrawn every
`resample_every` (10) epochs. The anchor's caption and video share one row index, so one
(anchor, positive, negative) triple of rows serves all four pair types (text-video,
video-text, text-text, video-video; `jaxsvr.losses.triplet`).

Per level:
- `verb`: positive = a clip with the anchor's verb; negative = a clip with another verb.
- `noun`: positive = a clip with one of the anchor's nouns (a noun drawn from its set, then a
  clip with that noun); negative = a clip with a noun outside the anchor's set.
- `action`: positive = a clip with the anchor's verb_noun action (verb + main noun);
  negative = a clip with another action.
Negatives are drawn uniformly over clips (so classes by frequency) and redrawn until valid.

Semantic positives (`semantic`, Wray et al. 2021, thresholded semantic triplets): the
action level instead takes its positives among the clips j with S(i, j) >= T under a
caption proxy (always including the anchor itself) and its negatives among the others;
`semantic` is that set as CSR rows (`jaxsvr.relevance.proxies.threshold_pairs`). Instance
training is the special case where each anchor's only positive is itself.

Margins (host-side, for the sampled negatives): `fixed` gives `fixed_margin` everywhere;
`relevance` gives the relevance margin of "Relevance-based Margin for Contrastively-trained
Video Retrieval Models": 1 - R(anchor, negative) at the action level, with R the EPIC class
relevance ½ IoU(verbs) + ½ IoU(nouns) (`jaxsvr.relevance.classes`), and ½ (1 - IoU) of that
part of speech at the verb/noun level (the other part of speech counted as fully relevant).

Batches: epoch e visits the anchors in a permutation drawn from (seed, e) and drops the
last partial batch; batch `step` of the epoch is a pure function of (seed, epoch, step), so a
resumed run sees the same batches. The rows of a batch are [B, M] row indices in the
`TripletLayout` the loss (`jaxsvr.losses.triplet`) reads them by: column 0 is the anchor,
then per level K positives, K negatives (M = 1 + 2 K n_levels).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.errors import InputError
from jaxsvr.relevance.levels import LevelRelevance
from jaxsvr.sampling import pairs as batches

LEVELS = ("verb", "noun", "action")
MARGINS = ("fixed", "relevance")
_REJECTION_ROUNDS = 30


@dataclasses.dataclass(frozen=True)
class TripletLayout:
    """Where each row of a triplet batch sits: the one structure the sampler writes
    ([B, M] row indices) and the loss reads ([B, M, ...] embeddings).

    Column `ANCHOR` (0) is the anchor; level slot s (the position of its level in
    `levels`) holds K positives in columns 1 + 2Ks ... 1 + 2Ks + K - 1 and then K
    negatives; M = `rows_per_anchor` = 1 + 2K n_levels.
    """

    levels: tuple[str, ...]  # the sampler's levels, in slot order
    k: int  # triplets per anchor and level

    ANCHOR = 0

    @property
    def rows_per_anchor(self) -> int:
        return 1 + 2 * len(self.levels) * self.k

    def slot(self, level: str) -> int:
        """The level's position among the sampler's levels (its margin column too)."""
        return self.levels.index(level)

    def positives(self, level: str) -> slice:
        """The K columns of the level's positives."""
        start = 1 + 2 * self.k * self.slot(level)
        return slice(start, start + self.k)

    def negatives(self, level: str) -> slice:
        """The K columns of the level's negatives."""
        start = 1 + 2 * self.k * self.slot(level) + self.k
        return slice(start, start + self.k)


@dataclasses.dataclass(frozen=True)
class Triplets:
    """The triplets of one sampling block (epochs b * resample_every ...)."""

    positive: np.ndarray  # [N, n_levels, K] int32 row indices
    negative: np.ndarray  # [N, n_levels, K] int32
    margin: np.ndarray  # [N, n_levels, K] float32


class TripletSampler:
    """Samples triplets and batches for a training split.

    Args:
      verbs: [N] verb class per clip.
      nouns: the noun class set of each clip.
      main_noun: [N] main noun per clip (the action is verb + main noun); None takes the
        smallest class of each set.
      levels: the levels to sample, in layout order (a subset of LEVELS).
      num_triplets: K, triplets per anchor and level (JPoSE: 10).
      resample_every: epochs between redraws (JPoSE: 10).
      margin: "fixed" or "relevance".
      fixed_margin: the margin when margin == "fixed" (JPoSE: 1.0).
      seed: the sampling seed.
      semantic: (indptr [N + 1], indices) CSR of each clip's semantic positives for the
        action level (itself included); None samples actions by class.
    """

    def __init__(
        self,
        verbs: np.ndarray,
        nouns: ClassSets,
        main_noun: np.ndarray | None = None,
        *,
        levels: tuple[str, ...] = LEVELS,
        num_triplets: int = 10,
        resample_every: int = 10,
        margin: str = "fixed",
        fixed_margin: float = 1.0,
        seed: int = 0,
        semantic: tuple[np.ndarray, np.ndarray] | None = None,
    ):
        if not levels or set(levels) - set(LEVELS):
            raise InputError(f"unknown triplet levels {levels}: use a subset of {LEVELS}")
        if margin not in MARGINS:
            raise InputError(f"unknown margin {margin!r} in config.loss.margin: use {MARGINS}")
        if num_triplets < 1 or resample_every < 1:
            raise InputError("num_triplets and resample_every must be >= 1")
        self.verbs = np.asarray(verbs, np.int64)
        self.nouns = nouns
        self.n = self.verbs.size
        if len(nouns) != self.n:
            raise ValueError("verbs and nouns disagree in length")
        if self.n < 2:
            raise InputError(f"a training split needs at least 2 clips, got {self.n}")
        if main_noun is None:
            first = np.minimum(nouns.indptr[:-1], max(nouns.indices.size - 1, 0))
            main_noun = np.where(nouns.sizes > 0, nouns.indices[first], -1)
        num_nouns = int(max(nouns.indices.max(initial=-1), np.max(main_noun)) + 1)
        self.levels = tuple(levels)
        self.k = num_triplets
        self.resample_every = resample_every
        self.margin_kind = margin
        self.fixed_margin = float(fixed_margin)
        self.seed = seed
        self.relevance = LevelRelevance(ClassSets.from_labels(self.verbs), nouns)
        _, self.action = np.unique(
            self.verbs * (num_nouns + 1) + (np.asarray(main_noun) + 1), return_inverse=True
        )
        self.by_verb = _inverted(self.verbs)
        self.by_action = _inverted(self.action)
        self.by_noun = _inverted(nouns.indices, owners=nouns.rows)
        self.semantic = None
        if semantic is not None:
            if margin != "fixed":
                raise InputError(
                    "semantic (proxy) positives use a fixed margin: set config.loss.margin='fixed'"
                )
            indptr, indices = (np.asarray(x) for x in semantic)
            if indptr.size != self.n + 1:
                raise ValueError(
                    f"semantic positives have {indptr.size - 1} rows for {self.n} clips"
                )
            counts = np.diff(indptr)
            if np.any(counts < 0) or (
                indices.size and not 0 <= indices.min() <= indices.max() < self.n
            ):
                raise ValueError(f"semantic positives must be CSR over {self.n} clips")
            # sorted keys i * N + j of the positive pairs, for membership tests
            owners = np.repeat(np.arange(self.n, dtype=np.int64), counts)
            self._semantic_keys = np.sort(owners * self.n + indices)
            self.semantic = (indptr[:-1].astype(np.int64), counts, indices.astype(np.int64))

    @property
    def layout(self) -> TripletLayout:
        return TripletLayout(tuple(self.levels), self.k)

    @property
    def rows_per_anchor(self) -> int:
        return self.layout.rows_per_anchor

    def steps_per_epoch(self, batch_size: int) -> int:
        return batches.steps_per_epoch(self.n, batch_size)

    @functools.lru_cache(maxsize=2)  # noqa: B019 (the sampler lives as long as the run)
    def triplets(self, block: int) -> Triplets:
        """The triplets of sampling block `block` (epochs block * resample_every ...)."""
        rng = np.random.default_rng([self.seed, block, 0x7419])
        shape = (self.n, len(self.levels), self.k)
        positive = np.empty(shape, np.int32)
        negative = np.empty(shape, np.int32)
        margin = np.empty(shape, np.float32)
        anchors = np.broadcast_to(np.arange(self.n)[:, None], (self.n, self.k))
        for slot, level in enumerate(self.levels):
            positive[:, slot] = self._positives(level, anchors, rng)
            neg = self._negatives(level, anchors, rng)
            negative[:, slot] = neg
            if self.margin_kind == "fixed":
                margin[:, slot] = self.fixed_margin
            else:
                margin[:, slot] = self.relevance_margin(level, anchors, neg)
        return Triplets(positive, negative, margin)

    def relevance_margin(self, level: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The relevance margin 1 - R_level(a, b) between clips a and b (row indices)."""
        return 1.0 - self.relevance.pairs(level, a, b)

    def epoch_order(self, epoch: int) -> np.ndarray:
        """[N] the anchors of epoch `epoch` in visiting order."""
        return batches.epoch_order(self.seed, epoch, self.n)

    def batch(
        self, epoch: int, step: int, batch_size: int, share: slice = slice(None)
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rows [S, M] int32 and margins [S, n_levels, K] float32 of the anchors `share`
        (S of them; all B by default) of one batch."""
        anchors = self.epoch_order(epoch)[step * batch_size : (step + 1) * batch_size][share]
        t = self.triplets(epoch // self.resample_every)
        layout = self.layout
        rows = np.empty((anchors.size, layout.rows_per_anchor), np.int32)
        rows[:, layout.ANCHOR] = anchors
        for level in self.levels:
            slot = layout.slot(level)
            rows[:, layout.positives(level)] = t.positive[anchors, slot]
            rows[:, layout.negatives(level)] = t.negative[anchors, slot]
        return rows, t.margin[anchors]

    def _positives(self, level: str, anchors: np.ndarray, rng) -> np.ndarray:
        a = anchors
        if level == "verb":
            return _draw(self.by_verb, self.verbs[a], rng)
        if level == "action":
            if self.semantic is not None:
                return _draw(self.semantic, a, rng)
            return _draw(self.by_action, self.action[a], rng)
        # noun: a noun of the anchor's set, then a clip with that noun; no noun -> itself
        sizes = self.nouns.sizes[a]
        pick = self.nouns.indptr[a] + (rng.random(a.shape) * np.maximum(sizes, 1)).astype(int)
        noun = self.nouns.indices[np.minimum(pick, self.nouns.indices.size - 1)]
        return np.where(sizes > 0, _draw(self.by_noun, noun, rng), a)

    def _valid(self, level: str, a: np.ndarray, c: np.ndarray) -> np.ndarray:
        if level == "verb":
            return self.verbs[c] != self.verbs[a]
        if level == "action":
            if self.semantic is not None:
                keys = a * self.n + c
                at = np.minimum(
                    np.searchsorted(self._semantic_keys, keys), self._semantic_keys.size - 1
                )
                return self._semantic_keys[at] != keys
            return self.action[c] != self.action[a]
        bits = self.relevance.noun_bits
        return np.any(bits[c] & ~bits[a], axis=-1)

    def _negatives(self, level: str, anchors: np.ndarray, rng) -> np.ndarray:
        neg = rng.integers(0, self.n, anchors.shape)
        for _ in range(_REJECTION_ROUNDS):
            bad = ~self._valid(level, anchors, neg)
            if not bad.any():
                return neg
            neg[bad] = rng.integers(0, self.n, int(bad.sum()))
        # Rare anchors whose class covers most clips: draw from the exact valid set.
        bad = ~self._valid(level, anchors, neg)
        everyone = np.arange(self.n)
        for i, j in zip(*np.nonzero(bad)):
            ok = np.flatnonzero(self._valid(level, np.full(self.n, anchors[i, j]), everyone))
            if ok.size == 0:
                raise InputError(
                    f"no {level} negative for training clip {anchors[i, j]}: every clip "
                    f"shares its {level}; the training split needs more than one {level} class"
                )
            neg[i, j] = ok[rng.integers(ok.size)]
        return neg


def _inverted(labels: np.ndarray, owners: np.ndarray | None = None):
    """CSR index label -> owners (rows) having it: (starts, counts, members)."""
    owners = np.arange(labels.size) if owners is None else owners
    order = np.argsort(labels, kind="stable")
    size = int(labels.max(initial=-1)) + 1
    counts = np.bincount(labels, minlength=size)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return starts, counts, owners[order]


def _draw(index, label: np.ndarray, rng) -> np.ndarray:
    """A uniformly drawn owner of each label."""
    starts, counts, members = index
    offset = (rng.random(label.shape) * counts[label]).astype(np.int64)
    return members[starts[label] + offset]
