"""Per-level relevance against Python sets and the EPIC class relevance."""

import numpy as np
import pytest

from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.relevance import class_relevance, levels
from jaxsvr.relevance.levels import LevelRelevance


def iou(a, b):
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else 0.0


def random_sets(rng, n, classes, max_size):
    return [
        sorted(rng.choice(classes, rng.integers(0, max_size + 1), replace=False)) for _ in range(n)
    ]


def test_levels_against_python_sets():
    rng = np.random.default_rng(0)
    verbs = [[int(v)] for v in rng.integers(0, 70, 40)]  # 70 classes: two bitset words
    nouns = random_sets(rng, 40, 130, 3)
    rel = LevelRelevance(ClassSets.from_lists(verbs), ClassSets.from_lists(nouns))
    rows, cols = rng.integers(0, 40, 11), rng.integers(0, 40, 9)
    for level in ("action", "sentence", "verb", "noun"):
        got = rel.matrix(level, rows, cols)
        assert got.shape == (11, 9) and got.dtype == np.float32
        for i, r in enumerate(rows):
            for j, c in enumerate(cols):
                iv, inn = iou(verbs[r], verbs[c]), iou(nouns[r], nouns[c])
                want = {"verb": 0.5 + 0.5 * iv, "noun": 0.5 + 0.5 * inn}.get(level, (iv + inn) / 2)
                assert got[i, j] == pytest.approx(want, abs=1e-6)
    np.testing.assert_array_equal(rel.pairs("noun", rows[:5], cols[:5]), got[:5, :5].diagonal())


def test_action_level_is_the_class_relevance():
    rng = np.random.default_rng(1)
    verbs = ClassSets.from_labels(rng.integers(0, 20, 60))
    nouns = ClassSets.from_lists(random_sets(rng, 60, 40, 3))
    rel = LevelRelevance(verbs, nouns)
    want = class_relevance(verbs, nouns, verbs, nouns)
    np.testing.assert_allclose(rel.matrix("action", np.arange(60), np.arange(60)), want, atol=1e-6)


def test_unknown_level():
    rel = LevelRelevance(ClassSets.from_labels([0, 1]), ClassSets.from_lists([[0], [1]]))
    with pytest.raises(ValueError, match="level"):
        rel.pairs("object", np.array([0]), np.array([1]))


def test_videos_against_their_captions_own_classes():
    """Text-side sets (a caption's own classes) against clip sets: IoU(clip a, caption b)."""
    verbs = ClassSets.from_lists([[0, 1], [2]])  # video verb sets (rho-aggregated)
    nouns = ClassSets.from_lists([[5], [5, 6]])
    text_verbs = ClassSets.from_lists([[0], [3]])  # each row's caption
    text_nouns = ClassSets.from_lists([[5, 70], []])  # 70: a class id past 64 bits
    lr = LevelRelevance(verbs, nouns, text_verbs, text_nouns)
    # row 0's video vs its own caption: verbs 1/2, nouns 1/2 -> 0.5
    # row 0's video vs caption 1: verbs 0, nouns 0 (empty caption set) -> 0
    # row 1's video vs caption 0: verbs 0, nouns {5} / {5, 6, 70} -> 1/6
    want = np.array([[0.5, 0.0], [1 / 6, 0.0]], np.float32)
    np.testing.assert_allclose(lr.matrix("action", [0, 1], [0, 1]), want, rtol=1e-6)
    np.testing.assert_allclose(lr.matrix("verb", [0], [0]), [[0.75]])
    same = LevelRelevance(verbs, nouns)
    np.testing.assert_allclose(np.diagonal(same.matrix("action", [0, 1], [0, 1])), 1.0)


def test_rows_above_a_threshold_per_signature():
    """`above` equals thresholding whole `matrix` rows, at every level, with caption sets
    that differ from the clips'; `groups` joins exactly the rows with equal clip sets."""
    rng = np.random.default_rng(2)
    n = 300  # few classes: some rows share a signature (202 distinct among 300)
    verbs = ClassSets.from_lists(random_sets(rng, n, 4, 2))
    nouns = ClassSets.from_lists(random_sets(rng, n, 70, 2))  # two bitset words
    text_verbs = ClassSets.from_lists(random_sets(rng, n, 4, 1))
    text_nouns = ClassSets.from_lists(random_sets(rng, n, 70, 3))
    for rel in (LevelRelevance(verbs, nouns), LevelRelevance(verbs, nouns, text_verbs, text_nouns)):
        rows = np.arange(n)
        for level in ("action", "verb", "noun"):
            for threshold in (0.0, 0.1, 0.5, 0.75):
                full = rel.matrix(level, rows, rows)
                got = rel.above(level, rows, threshold)
                assert len(got) == n
                for r in rows:
                    np.testing.assert_array_equal(got[r], np.flatnonzero(full[r] > threshold))
        groups = rel.groups
        assert 1 < groups.max() + 1 < n  # shared and distinct signatures
        for a in rng.integers(0, n, 40):
            for b in rng.integers(0, n, 40):
                same = set(verbs[a]) == set(verbs[b]) and set(nouns[a]) == set(nouns[b])
                assert (groups[a] == groups[b]) == same


@pytest.mark.parametrize("own_captions", [True, False])
def test_iou_tables_equal_the_bit_operations(own_captions, monkeypatch):
    """The per-part IoU tables give every level's relevance bit for bit as the bit
    operations do (tables over the distinct sets; caption sets that differ from the
    clips'), and a table over `_TABLE_PAIRS` pairs is not built (the bit operations)."""
    rng = np.random.default_rng(5)
    n = 400
    verbs = ClassSets.from_lists(random_sets(rng, n, 6, 2))
    nouns = ClassSets.from_lists(random_sets(rng, n, 130, 3))  # three bitset words
    text = (
        ()
        if own_captions
        else (
            ClassSets.from_lists(random_sets(rng, n, 6, 1)),
            ClassSets.from_lists(random_sets(rng, n, 130, 2)),
        )
    )
    tabled = LevelRelevance(verbs, nouns, *text)
    assert tabled._tables == {}
    tabled.pairs("verb", 0, 1)  # builds the verb table alone
    assert list(tabled._tables) == ["verb"]
    tabled.pairs("action", 0, 1)  # and then the noun table
    assert all(tabled._tables[pos] is not None for pos in ("verb", "noun"))
    monkeypatch.setattr(levels, "_TABLE_PAIRS", 0)
    bitwise = LevelRelevance(verbs, nouns, *text)
    bitwise.pairs("action", 0, 1)
    assert bitwise._tables == {"verb": None, "noun": None}
    verb_sets = len({tuple(verbs[i]) for i in range(n)})
    assert tabled._tables["verb"][2].shape[0] == verb_sets < n  # one row per distinct set
    rows, cols = rng.integers(0, n, (50, 1)), rng.integers(0, n, (1, 60))
    for level in ("action", "sentence", "verb", "noun"):
        got, want = tabled.pairs(level, rows, cols), bitwise.pairs(level, rows, cols)
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
        np.testing.assert_array_equal(
            tabled.pairs(level, rows[:7, 0], cols[0, :7]), want[np.arange(7), np.arange(7)]
        )
        for r in (0, 17):
            np.testing.assert_array_equal(
                tabled.above(level, [r], 0.3)[0], bitwise.above(level, [r], 0.3)[0]
            )


def test_no_rows():
    rel = LevelRelevance(ClassSets.from_lists([]), ClassSets.from_lists([]))
    assert rel.matrix("action", np.zeros(0, int), np.zeros(0, int)).shape == (0, 0)


def test_wide_sets_keep_the_bit_operations(monkeypatch):
    """The words to compare cap a table too (wide bitsets of free-form captions), and the
    hashed count of distinct sets, which decides before the exact one, never exceeds it."""
    rng = np.random.default_rng(6)
    nouns = ClassSets.from_lists(random_sets(rng, 200, 700, 4))  # 11 bitset words
    verbs = ClassSets.from_labels(rng.integers(0, 3, 200))
    rel = LevelRelevance(verbs, nouns)
    distinct = len({tuple(nouns[i]) for i in range(200)})
    assert (
        levels._hashed_count(rel.noun_bits) <= distinct == len(levels._distinct(rel.noun_bits)[0])
    )
    monkeypatch.setattr(levels, "_TABLE_WORDS", distinct * distinct * 11 - 1)
    rel.pairs("action", 0, 1)
    assert rel._tables["noun"] is None and rel._tables["verb"] is not None
