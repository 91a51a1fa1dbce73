"""Where streamed evaluation's blocks come from: similarity rows and relevance rows of a
block of queries, in either direction (0: clips against every sentence, 1: sentences
against every clip), without the [n_videos, n_texts] matrices.

Similarity (`Embeddings`, `Matrix`: `shape` and `rows(direction, first, last)`):

- `Embeddings(video, text)`: a float32 product of the query rows and all item embeddings,
  the dot product the models' `similarity` computes (every jaxsvr model scores unit
  vectors, so this is their cosine score; embeddings are used as given, not normalised).
  OpenBLAS's blocked matrix product sums every dot product in the same order whatever the
  shapes, so a block is the rows of the dense `video @ text.T` (or of its transpose) bit
  for bit (tested at EK-100 size). Small products (OpenBLAS's small-matrix kernels;
  20 x 300 at d = 256 is one) and one-row products (the matrix-vector kernel: a block of
  one query is computed as two rows) sum in another order, so there a differently shaped
  dense product may differ in the last bit.
- `Matrix(sim)`: the rows or columns of a materialised similarity, for models whose score
  is not a dot product of embeddings (HGR).

Relevance (`BlockRelevance`, `MatrixRelevance`: `shape` and `block(direction, start,
stop)`):

- `BlockRelevance(terms)`: from class sets, per term an IoU table between the block's
  distinct query sets and the items' distinct sets (`relevance.classes.iou_table`:
  |A ∩ B| from a multi-hot product, union = |A| + |B| - |A ∩ B|, in float32), weighted and
  summed as `weighted_iou` does, so every entry equals the dense matrix's bit for bit.
- `MatrixRelevance(rel)`: the rows or columns of a materialised relevance (a split's).

Positives (`Positives`: `shape` and `block(direction, start, stop)`): binary positives of
the recall metrics beside the relevance's (single-instance retrieval: the clips narrated
with the sentence), kept as each query's positive items, since they are few: a block is
(count per query, item indices), not a matrix block.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.errors import InputError
from jaxsvr.relevance.classes import iou_table

Terms = Sequence[tuple[float, ClassSets, ClassSets]]  # (weight, clip sets, sentence sets)


class Embeddings:
    """Similarity blocks from embeddings: rows of `video @ text.T` (direction 0) or of
    `text @ video.T` (direction 1), by `block_similarity`.

    Args:
      video: [n_videos, d], text: [n_texts, d] embeddings (float32; memory maps stay maps).

    Raises:
      InputError: shapes that do not match, no rows, or non-finite values.
    """

    def __init__(self, video: np.ndarray, text: np.ndarray):
        self.video, self.text = _check_embeddings(video, text)
        self.shape = (len(self.video), len(self.text))

    def rows(self, direction: int, first: int, last: int) -> np.ndarray:
        """[last - first, n_items] float32 similarities of queries first..last - 1."""
        queries, items = (self.video, self.text) if direction == 0 else (self.text, self.video)
        return block_similarity(queries[first:last], items)


class Matrix:
    """Similarity blocks from a materialised [n_videos, n_texts] matrix (models whose score
    is not a dot product of embeddings, e.g. HGR): its rows, or its columns as rows."""

    def __init__(self, sim: np.ndarray):
        self.sim = np.asarray(sim)
        if self.sim.ndim != 2 or self.sim.size == 0:
            raise InputError(f"similarity {self.sim.shape} must be a non-empty 2-D matrix")
        self.shape = self.sim.shape

    def rows(self, direction: int, first: int, last: int) -> np.ndarray:
        return _rows_of(self.sim, direction, first, last, np.float32)


class MatrixRelevance:
    """Relevance blocks from a materialised [n_videos, n_texts] matrix (a split's
    relevance, a caption proxy), as `BlockRelevance` gives them from class sets."""

    def __init__(self, rel: np.ndarray):
        self.rel = np.asarray(rel)
        self.shape = self.rel.shape

    def block(self, direction: int, start: int, stop: int) -> np.ndarray:
        return _rows_of(self.rel, direction, start, stop, np.float32)


class Positives:
    """Binary positives [n_videos, n_texts] (1: a positive, 0: not) as each query's positive
    items in both directions, for `streamed.stream_stats(positives=...)`.

    Example:
      pos = Positives(split.instance_relevance())
      count, items = pos.block(1, 0, 8)  # sentences 0..7: count [8], their clips [sum(count)]

    Raises:
      InputError: not a 2-D matrix of 0 and 1.
    """

    def __init__(self, matrix: np.ndarray):
        matrix = np.asarray(matrix)
        rows, cols = np.nonzero(matrix) if matrix.ndim == 2 else ((), ())  # by clip, sentence
        if matrix.ndim != 2 or not (matrix[rows, cols] == 1).all():
            raise InputError(
                f"positives {matrix.shape} must be a 2-D matrix of 0 and 1 (1: the item is a "
                "positive of the query)"
            )
        self.shape = matrix.shape
        by_col = np.argsort(cols, kind="stable")  # by sentence, then clip
        self._entries = [
            (_offsets(rows, self.shape[0]), cols),
            (_offsets(cols[by_col], self.shape[1]), rows[by_col]),
        ]

    def block(self, direction: int, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """(count [stop - start] of positives per query, their items in query order) of
        queries start..stop - 1 of `direction` (0: clips, 1: sentences)."""
        offsets, items = self._entries[direction]
        return np.diff(offsets[start : stop + 1]), items[offsets[start] : offsets[stop]]


def _offsets(query: np.ndarray, n: int) -> np.ndarray:
    """[n + 1] offsets of each query's entries, `query` sorted."""
    return np.searchsorted(query, np.arange(n + 1))


def _rows_of(matrix: np.ndarray, direction: int, first: int, last: int, dtype) -> np.ndarray:
    """Rows first..last - 1 of `matrix` (direction 0) or of its transpose (1), contiguous."""
    part = matrix[first:last] if direction == 0 else matrix[:, first:last].T
    return np.ascontiguousarray(part, dtype=dtype)


def block_similarity(queries: np.ndarray, items: np.ndarray) -> np.ndarray:
    """[n, n_items] float32 dot products, the rows of the dense `queries @ items.T` (the
    module docstring says when bit for bit; one query is computed as two rows: the
    matrix-vector kernel NumPy takes for one row sums in another order)."""
    q = np.asarray(queries, np.float32)
    with np.errstate(over="ignore"):  # overflow is the caller's error (non-finite values)
        if len(q) == 1:
            return np.ascontiguousarray((np.concatenate([q, q]) @ items.T)[:1])
        return q @ items.T


class BlockRelevance:
    """Blocks of R = sum_k w_k IoU(a_k[i], b_k[j]) from class sets, in either direction.

    Each side's sets are factorised once (`ClassSets.unique`); a block computes an IoU
    table between its queries' distinct sets and the items' distinct sets, then gathers
    it, so memory is O(block x items) and every entry is `weighted_iou`'s bit for bit.

    Example:
      rel = BlockRelevance(class_terms(clip_verbs, clip_nouns, sent_verbs, sent_nouns))
      r = rel.block(0, 0, 8)  # [8, n_texts]: clips 0..7 against every sentence
      r = rel.block(1, 0, 8)  # [8, n_videos]: sentences 0..7 against every clip
    """

    def __init__(self, terms: Terms):
        if not terms:
            raise InputError("no relevance terms: give the class sets of clips and sentences")
        sizes = {(len(a), len(b)) for _, a, b in terms}
        if len(sizes) != 1:
            raise InputError(
                f"relevance terms of different sizes {sorted(sizes)}: one "
                "set per clip and per sentence in every term"
            )
        self.shape = sizes.pop()  # (n_videos, n_texts)
        # per term: weight, then (distinct sets, inverse) of clips and of sentences
        self._terms = [(np.float32(w), a.unique(), b.unique()) for w, a, b in terms]

    def block(self, direction: int, start: int, stop: int) -> np.ndarray:
        """[stop - start, n_items] float32 relevance of queries start..stop - 1 of
        `direction` (0: clips against sentences, 1: sentences against clips)."""
        out = None
        for (table, inverse), item_id in zip(
            self.tables(direction, start, stop), self.item_ids(direction)
        ):
            part = np.take(table[inverse], item_id, axis=1)
            if out is None:
                out = part
            else:
                out += part
        return out

    def tables(self, direction: int, start: int, stop: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per term, the block's weighted IoU table [distinct query sets, distinct item
        sets] (float32) and each query's row in it ([stop - start] ints): the block is
        sum over terms of table[inverse][:, item_ids(direction)], in term order."""
        out = []
        for weight, *pair in self._terms:
            (query_sets, query_id), (item_sets, _) = pair[direction], pair[1 - direction]
            ids, inverse = np.unique(query_id[start:stop], return_inverse=True)
            table = iou_table(query_sets.take(ids), item_sets)
            if weight != 1.0:
                table *= weight
            out.append((table, inverse.reshape(-1)))
        return out

    def item_ids(self, direction: int) -> list[np.ndarray]:
        """Per term, each item's column in `tables(direction, ...)` ([n_items] ints)."""
        return [pair[1 - direction][1] for _, *pair in self._terms]


def _check_embeddings(video, text) -> tuple[np.ndarray, np.ndarray]:
    """The embeddings as float32 (memory maps stay maps), checked."""
    video, text = (np.asarray(e) for e in (video, text))
    if video.ndim != 2 or text.ndim != 2 or video.shape[1] != text.shape[1]:
        raise InputError(
            f"video embeddings {video.shape} and text embeddings {text.shape} must be "
            "[n_videos, d] and [n_texts, d] with the same width d"
        )
    if len(video) == 0 or len(text) == 0:
        raise InputError("embeddings are empty: need at least one video and one text")
    out = []
    for name, e in (("video", video), ("text", text)):
        e = e if e.dtype == np.float32 else e.astype(np.float32)
        if not (np.isfinite(e.min()) and np.isfinite(e.max())):
            bad = np.argwhere(~np.isfinite(e))[0].tolist()
            raise InputError(f"{name} embeddings have non-finite values (first at row {bad[0]})")
        out.append(e)
    return out[0], out[1]
