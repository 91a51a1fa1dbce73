"""Batches for the batch losses (online mining), host-side NumPy, a pure function of
(seed, epoch, step).

A batch holds B anchor clips (videos) and B captions paired with them, plus the relevance
of every video to every caption at each level the losses use:

- `video_rows` [B] int32: the anchors, in the epoch's order (`epoch_order`: a permutation
  drawn from (seed, epoch); the last partial batch is dropped);
- `text_rows` [B] int32: the clip whose caption is paired with each anchor. Pairing `own`:
  the anchor's own caption. Pairing `relevant` (EgoVLP / AVION sampling for MI-MM, adaptive
  MI-MM and SMS): a caption drawn uniformly among the training clips c with
  R(anchor, c) > `pair_threshold` (0.1), the anchor's own caption included, so
  rel[i, i] may be below 1. Drawn by rejection (uniform candidates, the first that
  qualifies; all 32 rounds drawn, then tested in one call), with an exact fallback for
  anchors whose relevant set is small: their relevant sets are built per clip signature
  (`LevelRelevance.above`) and kept, as the same rare signatures come back every epoch
  (EPIC-100 train: about 19 anchors of a batch of 128 miss the rounds, from 903
  signatures in the first epoch). (The public code draws among the distinct training
  sentences; here among clips.)
- `rel` [B, n_levels, B] float32: rel[i, l, j] = R_l(video_rows[i], text_rows[j]) at level
  l (`jaxsvr.relevance.levels`).

Every array has the batch on its first axis, so it shards over the `data` mesh axis.
"""

from __future__ import annotations

import numpy as np

from jaxsvr.errors import InputError
from jaxsvr.relevance.levels import LevelRelevance

PAIRINGS = ("own", "relevant")
_REJECTION_ROUNDS = 32
_KEPT = 1 << 24  # relevant clips kept over all signatures (64 MB of int32); beyond, rebuilt


def epoch_order(seed: int, epoch: int, n: int) -> np.ndarray:
    """[n] the anchors of epoch `epoch` in visiting order."""
    return np.random.default_rng([seed, epoch, 0x0DE5]).permutation(n)


def steps_per_epoch(n: int, batch_size: int) -> int:
    """Full batches per epoch; an error when the split is smaller than one batch."""
    steps = n // batch_size
    if steps == 0:
        raise InputError(
            f"batch size {batch_size} exceeds the {n} training clips: lower config.train.batch_size"
        )
    return steps


class PairSampler:
    """Batches of (video, caption) pairs with their relevance matrices.

    Args:
      relevance: per-level relevance of the training clips.
      levels: the levels to give `rel` for, in order.
      pairing: "own" or "relevant" (see the module docstring).
      pair_threshold: minimum relevance of a `relevant` pairing (exclusive).
      seed: the sampling seed.
    """

    def __init__(
        self,
        relevance: LevelRelevance,
        *,
        levels: tuple[str, ...],
        pairing: str = "own",
        pair_threshold: float = 0.1,
        seed: int = 0,
    ):
        if pairing not in PAIRINGS:
            raise InputError(
                f"unknown caption pairing {pairing!r} in config.sampler.pairing: use {PAIRINGS}"
            )
        if not 0.0 <= pair_threshold < 1.0:
            raise InputError(
                f"config.sampler.pair_threshold must be in [0, 1), got {pair_threshold}"
            )
        self.relevance = relevance
        self.n = len(relevance)
        self.levels = tuple(levels)
        self.pairing = pairing
        self.threshold = float(pair_threshold)
        self.seed = seed
        self._relevant: dict[int, np.ndarray] = {}  # clip signature -> its relevant clips
        self._kept = 0

    def steps_per_epoch(self, batch_size: int) -> int:
        return steps_per_epoch(self.n, batch_size)

    def batch(
        self, epoch: int, step: int, batch_size: int, share: slice = slice(None)
    ) -> dict[str, np.ndarray]:
        """`video_rows` [S], `text_rows` [S] int32 and `rel` [S, n_levels, B] float32: the
        rows `share` (S of them; all B by default) of the batch, against all its texts."""
        anchors = epoch_order(self.seed, epoch, self.n)[step * batch_size : (step + 1) * batch_size]
        if self.pairing == "own":
            texts = anchors
        else:
            rng = np.random.default_rng([self.seed, epoch, step, 0x9A1E])
            texts = self.relevant_captions(anchors, rng)
        mine = anchors[share]
        rel = np.stack([self.relevance.matrix(lv, mine, texts) for lv in self.levels], axis=1)
        return {
            "video_rows": mine.astype(np.int32),
            "text_rows": texts[share].astype(np.int32),
            "rel": rel,
        }

    def relevant_captions(self, anchors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """For each anchor, a clip drawn uniformly among those with R > threshold."""
        # Every round draws a candidate for every anchor, and the rounds stop once each
        # anchor has one; the draws after the rounds happen only when some anchor has none,
        # i.e. after all rounds. So drawing all rounds first and testing them at once gives
        # the same captions from the same random stream.
        cand = np.stack([rng.integers(0, self.n, anchors.size) for _ in range(_REJECTION_ROUNDS)])
        ok = self.relevance.pairs("action", anchors[None, :], cand) > self.threshold
        hit = ok.argmax(axis=0)  # each anchor's first qualifying round
        found = ok[hit, np.arange(anchors.size)]
        out = np.where(found, cand[hit, np.arange(anchors.size)], anchors).astype(anchors.dtype)
        for i in np.flatnonzero(~found):  # anchors the rounds missed: draw from the exact set
            choices = self.relevant_clips(anchors[i])
            out[i] = choices[rng.integers(choices.size)] if choices.size else anchors[i]
        return out

    def relevant_clips(self, anchor: int) -> np.ndarray:
        """The clips (ascending) with R(anchor, clip) > threshold, kept per signature."""
        group = int(self.relevance.groups[anchor])
        found = self._relevant.get(group)
        if found is None:
            found = self.relevance.above("action", np.array([anchor]), self.threshold)[0]
            found = found.astype(np.int32)
            found.flags.writeable = False  # shared by every later draw of this signature
            if self._kept + found.size <= _KEPT:
                self._relevant[group], self._kept = found, self._kept + found.size
        return found
