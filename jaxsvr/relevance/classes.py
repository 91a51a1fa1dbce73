"""EPIC-style class relevance: R(i, j) = 1/2 IoU(verb classes) + 1/2 IoU(noun classes).

This is the semantic relevance of the EPIC-KITCHENS-100 multi-instance retrieval benchmark
(Damen et al., IJCV 2022, Sec. "Multi-Instance Retrieval"): two items are fully relevant
(R = 1) when they share exactly the same verb and noun classes, and partially relevant when
they share some. With one verb class per item the verb term is 1/2 [v_i = v_j].

Computation (host-side NumPy, float32):
1. Relevance depends only on the class sets, so each side is factorised into distinct sets
   (`ClassSets.unique`): EPIC's 9668 test clips hold 97 distinct verb sets and 905 noun sets.
2. Per part of speech, an IoU table between distinct sets comes from a multi-hot product
   (intersection = A @ B.T over the classes that occur, union = |a| + |b| - intersection),
   in row chunks so memory stays bounded.
3. The full matrix is assembled chunk by chunk with row gathers from the tables, whose
   columns were expanded to the second side's items once.

`RelevanceIndex` keeps steps 1-2 for one collection (a training set), so a batch x batch
matrix is a few small gathers (timed by `benchmarks/evaluation_speed.py`:
docs/benchmarks.md#evaluation).
Two empty sets have IoU 0 (no evidence of relevance), so R(x, x) = 1 needs non-empty sets.
"""

from __future__ import annotations

import numpy as np

from jaxsvr.annotations.class_sets import ClassSets

_CHUNK_ROWS = 256  # keeps temporaries ~4 MB: fresh large buffers cost page faults


def iou_table(a: ClassSets, b: ClassSets, *, chunk_rows: int = _CHUNK_ROWS) -> np.ndarray:
    """IoU between every set of `a` and every set of `b`.

    Args:
      a, b: class sets; build the table over distinct sets (see `ClassSets.unique`).
      chunk_rows: rows of `a` per multi-hot product, bounding temporary memory.

    Returns:
      [len(a), len(b)] float32; 0 where both sets are empty.
    """
    classes = np.union1d(a.indices, b.indices)  # only classes that occur
    hot_b = _multi_hot(b, classes).T  # [K, nb]
    size_b = b.sizes.astype(np.float32)
    out = np.empty((len(a), len(b)), np.float32)
    for start in range(0, len(a), chunk_rows):
        part = a.take(np.arange(start, min(start + chunk_rows, len(a))))
        inter = _multi_hot(part, classes) @ hot_b  # exact small integers in float32
        union = part.sizes.astype(np.float32)[:, None] + size_b[None, :] - inter
        np.divide(inter, union, out=out[start : start + len(part)], where=union > 0)
        out[start : start + len(part)][union == 0] = 0.0
    return out


def _multi_hot(sets: ClassSets, classes: np.ndarray) -> np.ndarray:
    hot = np.zeros((len(sets), classes.size), np.float32)
    hot[sets.rows, np.searchsorted(classes, sets.indices)] = 1.0
    return hot


class RelevanceIndex:
    """Class relevance between items of one collection, ready for fast batch matrices.

    Example:
      index = RelevanceIndex(clips.verb_classes, clips.noun_classes)
      rel = index.matrix(batch_idx)  # [B, B] float32, rel[i, j] = R(item_i, item_j)
    """

    def __init__(self, verbs: ClassSets, nouns: ClassSets):
        if len(verbs) != len(nouns):
            raise ValueError(f"{len(verbs)} verb sets but {len(nouns)} noun sets")
        uverbs, self._verb_id = verbs.unique()
        unouns, self._noun_id = nouns.unique()
        self._verb_iou = iou_table(uverbs, uverbs)
        self._noun_iou = iou_table(unouns, unouns)

    def __len__(self) -> int:
        return self._verb_id.size

    def matrix(self, rows: np.ndarray, cols: np.ndarray | None = None) -> np.ndarray:
        """R between items `rows` and items `cols` (default: `rows`), [len(rows), len(cols)].

        The batch's distinct (verb set, noun set) pairs get a small table from the IoU
        tables, which is then expanded with a row gather and one `take`: 2-D fancy indexing
        and wide gathers are several times slower at B = 512.
        """
        rows = np.asarray(rows)
        row_pairs, row_inv = self._pairs(rows)
        if cols is None:
            col_pairs, col_inv = row_pairs, row_inv
        else:
            col_pairs, col_inv = self._pairs(np.asarray(cols))
        (rv, rn), (cv, cn) = row_pairs, col_pairs
        small = np.take(self._verb_iou[rv], cv, axis=1)
        small += np.take(self._noun_iou[rn], cn, axis=1)
        small *= np.float32(0.5)
        return np.take(small[row_inv], col_inv, axis=1)

    def _pairs(self, items: np.ndarray):
        """Distinct (verb set id, noun set id) pairs of `items` and each item's pair index."""
        n_nouns = self._noun_iou.shape[0]
        pairs, inverse = np.unique(
            self._verb_id[items] * n_nouns + self._noun_id[items], return_inverse=True
        )
        return np.divmod(pairs, n_nouns), inverse.reshape(-1)


def class_relevance(
    a_verbs: ClassSets,
    a_nouns: ClassSets,
    b_verbs: ClassSets,
    b_nouns: ClassSets,
    *,
    chunk_rows: int = _CHUNK_ROWS,
) -> np.ndarray:
    """R(i, j) = 1/2 IoU(verbs_i, verbs_j) + 1/2 IoU(nouns_i, nouns_j) for all pairs.

    Args:
      a_verbs, a_nouns: class sets of the row items (e.g. test clips).
      b_verbs, b_nouns: class sets of the column items (e.g. test sentences).
      chunk_rows: rows assembled at a time.

    Returns:
      [len(a), len(b)] float32 in [0, 1].
    """
    if len(a_verbs) != len(a_nouns) or len(b_verbs) != len(b_nouns):
        raise ValueError("verb and noun sets must describe the same items on each side")
    terms = [(0.5, a_verbs, b_verbs), (0.5, a_nouns, b_nouns)]
    return weighted_iou(terms, chunk_rows=chunk_rows)


def weighted_iou(
    terms: list[tuple[float, ClassSets, ClassSets]], *, chunk_rows: int = _CHUNK_ROWS
) -> np.ndarray:
    """sum_k w_k IoU(a_k[i], b_k[j]) for all pairs (i, j): class relevance and the caption
    proxies (BoW: one term of weight 1; PoS / SYN: verbs and nouns).

    Args:
      terms: (weight, row sets, column sets); every term has the same row and column counts.
      chunk_rows: rows assembled at a time.

    Returns:
      [rows, columns] float32.
    """
    if not terms:
        raise ValueError("weighted_iou needs at least one term")
    n_a, n_b = len(terms[0][1]), len(terms[0][2])
    if any(len(a) != n_a or len(b) != n_b for _, a, b in terms):
        raise ValueError("every term must describe the same row and column items")
    out = np.empty((n_a, n_b), np.float32)
    tables = []
    for weight, sets_a, sets_b in terms:
        ua, ia = sets_a.unique()
        ub, ib = sets_b.unique()
        # Columns expanded once: [distinct a sets, n_b]; rows are gathered per chunk.
        table = np.take(iou_table(ua, ub), ib, axis=1)
        if weight != 1.0:
            table *= np.float32(weight)
        tables.append((table, ia))
    for start in range(0, n_a, chunk_rows):
        part = out[start : start + chunk_rows]
        rows = slice(start, start + part.shape[0])
        np.take(tables[0][0], tables[0][1][rows], axis=0, out=part)
        for table, ids in tables[1:]:
            part += table[ids[rows]]
    return out
