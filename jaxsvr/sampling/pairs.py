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
  qualifies), with an exact fallback for anchors whose relevant set is tiny. (The public
  code draws among the distinct training sentences; here among clips.)
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
_EXACT_ROWS = 16  # rare anchors whose exact relevance rows are built at once (x n clips x words)


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
        out = anchors.copy()
        todo = np.ones(anchors.size, bool)
        for _ in range(_REJECTION_ROUNDS):
            cand = rng.integers(0, self.n, anchors.size)
            ok = todo & (self.relevance.pairs("action", anchors, cand) > self.threshold)
            out[ok] = cand[ok]
            todo &= ~ok
            if not todo.any():
                return out
        everyone = np.arange(self.n)
        rare = np.flatnonzero(todo)  # anchors the rounds missed: draw from the exact set
        for first in range(0, rare.size, _EXACT_ROWS):
            rows = rare[first : first + _EXACT_ROWS]
            rel = self.relevance.matrix("action", anchors[rows], everyone)
            for i, r in zip(rows, rel):
                choices = np.flatnonzero(r > self.threshold)
                out[i] = choices[rng.integers(choices.size)] if choices.size else anchors[i]
        return out
