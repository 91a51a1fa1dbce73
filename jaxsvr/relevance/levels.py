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

Relevance depends only on the clip's (verb, noun) bitsets and the caption's, and a table
has far fewer distinct ones than rows (EPIC-100 train: 2212 signatures among 16115
clips). So a whole row (`above`: every caption relevant to a clip beyond a threshold) is
one relevance per distinct caption signature, spread to the rows that have it, with the
same values as `matrix`; and rows whose clips share a signature (`groups`) have the same
row, which the pair sampler uses to keep rows.

The same holds per part of speech, with fewer still (EPIC-100 train: 86 verb sets, 781
noun sets): each part's IoU is a table over (clip set, caption set) pairs, built on
first use from one row of each distinct set, and `iou` gathers from it, the same float32
values as the bit operations bit for bit (the same operations on the same bits). A table
of more than `_TABLE_PAIRS` pairs, or `_TABLE_WORDS` words to compare (e.g. free-form
captions, whose sets are mostly distinct), is not built, which a hashed count of the
distinct sets tells before the exact one; its part keeps the bit operations. At EPIC-100
train size the tables take 2.5 MB and ~70 ms to build, and a batch of the SMS heads'
sampler (32 rounds of 128 candidate pairs, then the [128, 128] batch relevance) takes
0.6–0.7 ms after the first epoch instead of 1.7–2.2
(docs/benchmarks.md#sms-heads-step-against-the-public-pytorch-code).
"""

from __future__ import annotations

import functools

import numpy as np

from jaxsvr.annotations.class_sets import ClassSets

LEVELS = ("action", "sentence", "verb", "noun")
_TABLE_PAIRS = 1 << 22  # (clip set, caption set) pairs of an IoU table: 16 MB of float32
_TABLE_WORDS = 1 << 25  # pairs x bitset words compared to build it (~0.3 s)
_BLOCK_WORDS = 1 << 19  # pairs x words of a block of the build (4 MB temporaries)
_NOT_BUILT = "not built"


class LevelRelevance:
    """Relevance between rows of one clip table at every level: row a's video against row
    b's caption.

    Args:
      verbs, nouns: the class sets of the clips (EPIC: one verb class per clip).
      text_verbs, text_nouns: the class sets of the rows' captions where they differ from
        their clips' (a multi-caption video's captions); default: the clips'.
    """

    def __init__(
        self,
        verbs: ClassSets,
        nouns: ClassSets,
        text_verbs: ClassSets | None = None,
        text_nouns: ClassSets | None = None,
    ):
        text_verbs = verbs if text_verbs is None else text_verbs
        text_nouns = nouns if text_nouns is None else text_nouns
        if not len(verbs) == len(nouns) == len(text_verbs) == len(text_nouns):
            raise ValueError("verb and noun sets disagree in length")
        verb_width, noun_width = _classes(verbs, text_verbs), _classes(nouns, text_nouns)
        self.verb_bits = bitsets(verbs, verb_width)
        self.noun_bits = bitsets(nouns, noun_width)
        self.text_verb_bits = (
            self.verb_bits if text_verbs is verbs else bitsets(text_verbs, verb_width)
        )
        self.text_noun_bits = (
            self.noun_bits if text_nouns is nouns else bitsets(text_nouns, noun_width)
        )
        # Per part of speech, built on first use (`iou`): (each row's clip set index, each
        # row's caption set index, [clip sets, caption sets] float32 IoU), or None.
        self._tables: dict[str, tuple | None] = {}

    def __len__(self) -> int:
        return len(self.verb_bits)

    def iou(self, pos: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """IoU of the `pos` ("verb" or "noun") sets of row a's clip and row b's caption
        (broadcast)."""
        clip_bits, caption_bits = (
            (self.verb_bits, self.text_verb_bits)
            if pos == "verb"
            else (self.noun_bits, self.text_noun_bits)
        )
        table = self._tables.get(pos, _NOT_BUILT)
        if table is _NOT_BUILT:  # another thread may build it too: the same table
            table = self._tables[pos] = _iou_table(clip_bits, caption_bits)
        if table is not None:
            clip_set, caption_set, values = table
            return values[clip_set[a], caption_set[b]]
        return bit_iou(clip_bits[a], caption_bits[b])

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

    @functools.cached_property
    def groups(self) -> np.ndarray:
        """[n] int64: each row's clip signature, an index shared by exactly the rows whose
        clips have the same verb and noun sets (so the same relevance to every caption)."""
        return _signatures(self.verb_bits, self.noun_bits)[1]

    @functools.cached_property
    def _captions(self) -> tuple[np.ndarray, np.ndarray]:
        """(one row of each caption signature, each row's caption signature)."""
        return _signatures(self.text_verb_bits, self.text_noun_bits)

    def above(self, level: str, rows: np.ndarray, threshold: float) -> list[np.ndarray]:
        """For each of `rows`, the rows (ascending) whose caption has relevance >
        `threshold` to its clip at `level`: `np.flatnonzero(matrix(level, [row], all) >
        threshold)`, computed once per caption signature."""
        first, caption = self._captions
        hits = self.matrix(level, rows, first) > threshold  # [len(rows), caption signatures]
        return [np.flatnonzero(h[caption]) for h in hits]


def _signatures(verb_bits: np.ndarray, noun_bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row of each distinct (verb, noun) bitset pair, each row's pair index)."""
    both = np.concatenate([verb_bits, noun_bits], axis=1)
    _, first, inverse = np.unique(both, axis=0, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


def _iou_table(clip_bits: np.ndarray, caption_bits: np.ndarray) -> tuple | None:
    """(clip set of each row, caption set of each row, IoU of every pair of distinct sets),
    or None where those pairs are more than `_TABLE_PAIRS` or their words to compare more
    than `_TABLE_WORDS`."""
    same = caption_bits is clip_bits
    words = clip_bits.shape[1]
    # Distinct hashes are at most the distinct sets: a table too large by them is too large.
    hashed = _hashed_count(clip_bits)
    hashed *= hashed if same else _hashed_count(caption_bits)
    if not _small(hashed, words):
        return None
    clips, clip_set = _distinct(clip_bits)
    captions, caption_set = (clips, clip_set) if same else _distinct(caption_bits)
    if not _small(len(clips) * len(captions), words):
        return None
    values = np.empty((len(clips), len(captions)), np.float32)
    step = max(1, _BLOCK_WORDS // max(len(captions) * words, 1))  # rows of a block
    for i in range(0, len(clips), step):
        values[i : i + step] = bit_iou(clips[i : i + step, None], captions[None])
    values.flags.writeable = False
    return clip_set, caption_set, values


def _small(pairs: int, words: int) -> bool:
    return pairs <= _TABLE_PAIRS and pairs * words <= _TABLE_WORDS


def _hashed_count(bits: np.ndarray) -> int:
    """Distinct hashes of the rows of bits [n, words]: at most their distinct rows."""
    digest = bits[:, 0].copy()
    for k in range(1, bits.shape[1]):
        digest *= np.uint64(0x9E3779B97F4A7C15)  # wraps
        digest ^= bits[:, k]
    return len(np.unique(digest))


def _distinct(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct rows of bits [n, words], each row's index among them, int32)."""
    distinct, inverse = np.unique(bits, axis=0, return_inverse=True)
    return distinct, inverse.reshape(-1).astype(np.int32)


def _classes(*sets: ClassSets) -> int:
    """Number of classes the sets index (the largest id + 1)."""
    return max(int(s.indices.max(initial=-1)) for s in sets) + 1


def bitsets(sets: ClassSets, num_classes: int | None = None) -> np.ndarray:
    """[n, words] uint64: bit c of row i is set when class c is in set i (words for
    `num_classes`, default the sets' own)."""
    num_classes = _classes(sets) if num_classes is None else num_classes
    words = max(1, -(-num_classes // 64))
    bits = np.zeros((len(sets), words), np.uint64)
    rows, idx = sets.rows, sets.indices.astype(np.int64)
    np.bitwise_or.at(
        bits, (rows, idx // 64), np.left_shift(np.uint64(1), (idx % 64).astype(np.uint64))
    )
    return bits


def bit_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of bitsets along the last axis (broadcast); 0 where both are empty."""
    inter, union = _word_sum(np.bitwise_count(a & b)), _word_sum(np.bitwise_count(a | b))
    return np.where(union > 0, inter / np.maximum(union, 1), 0.0).astype(np.float32)


def _word_sum(counts: np.ndarray) -> np.ndarray:
    """Bit counts [..., words] summed over the words by column adds: NumPy's reduction
    over a short last axis is the slow part of `bit_iou` (docs/benchmarks.md, SMS)."""
    if counts.shape[-1] == 1:
        return counts[..., 0]
    total = counts[..., 0].astype(np.int32)
    for k in range(1, counts.shape[-1]):
        total += counts[..., k]
    return total
