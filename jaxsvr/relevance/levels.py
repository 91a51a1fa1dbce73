"""Class relevance per embedding level, between clips of one table, for training batches.

Levels (the spaces models train in, `jaxsvr.models`):
- `action` and `sentence`: the EPIC class relevance R = 1/2 IoU(verbs) + 1/2 IoU(nouns);
- `verb`: 1/2 + 1/2 IoU(verbs), and `noun`: 1/2 + 1/2 IoU(nouns): the other part of speech
  counts as fully relevant, as in "Relevance-based Margin for Contrastively-trained Video
  Retrieval Models" (PoS-level margin 1 - R = 1/2 (1 - IoU)) and in the public RAN/RANP
  code (`get_relevances_single_caption` with the other PoS set to one shared class).

Sets are stored as bitsets (uint64 words per clip), so the relevance of any pairs of rows
is a few vectorised bit operations: elementwise for sampled triplets (`pairs`), or a
[B, B] matrix for a batch (`matrix`). Two empty sets have IoU 0.
"""

from __future__ import annotations

import numpy as np

from jaxsvr.annotations.class_sets import ClassSets

LEVELS = ("action", "sentence", "verb", "noun")


class LevelRelevance:
    """Relevance between rows of one clip table at every level.

    Args:
      verbs, nouns: the class sets of the clips (EPIC: one verb class per clip).
    """

    def __init__(self, verbs: ClassSets, nouns: ClassSets):
        if len(verbs) != len(nouns):
            raise ValueError("verb and noun sets disagree in length")
        self.verb_bits = bitsets(verbs)
        self.noun_bits = bitsets(nouns)

    def __len__(self) -> int:
        return len(self.verb_bits)

    def iou(self, pos: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """IoU of the `pos` ("verb" or "noun") sets of rows a and b (broadcast)."""
        bits = self.verb_bits if pos == "verb" else self.noun_bits
        return bit_iou(bits[a], bits[b])

    def pairs(self, level: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Relevance at `level` of row pairs (a, b), broadcast like a and b; float32."""
        if level in ("action", "sentence"):
            return (0.5 * self.iou("verb", a, b) + 0.5 * self.iou("noun", a, b)).astype(np.float32)
        if level in ("verb", "noun"):
            return (0.5 + 0.5 * self.iou(level, a, b)).astype(np.float32)
        raise ValueError(f"unknown level {level!r}: use one of {LEVELS}")

    def matrix(self, level: str, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """[len(rows), len(cols)] relevance at `level`."""
        return self.pairs(level, np.asarray(rows)[:, None], np.asarray(cols)[None, :])


def bitsets(sets: ClassSets) -> np.ndarray:
    """[n, words] uint64: bit c of row i is set when class c is in set i."""
    num_classes = int(sets.indices.max(initial=-1)) + 1
    words = max(1, -(-num_classes // 64))
    bits = np.zeros((len(sets), words), np.uint64)
    rows, idx = sets.rows, sets.indices.astype(np.int64)
    np.bitwise_or.at(
        bits, (rows, idx // 64), np.left_shift(np.uint64(1), (idx % 64).astype(np.uint64))
    )
    return bits


def bit_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of bitsets along the last axis (broadcast); 0 where both are empty."""
    inter = np.bitwise_count(a & b).sum(-1)
    union = np.bitwise_count(a | b).sum(-1)
    return np.where(union > 0, inter / np.maximum(union, 1), 0.0).astype(np.float32)
