"""Batches for batch losses: pure function of (seed, epoch, step), relevance matrices, and
the EgoVLP-style pairing with a relevant caption."""

import numpy as np
import pytest

from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.errors import InputError
from jaxsvr.relevance.levels import LevelRelevance
from jaxsvr.sampling import pairs
from jaxsvr.sampling.pairs import PairSampler, epoch_order

LEVELS = ("action", "verb", "noun")


def relevance(n=60, seed=0):
    rng = np.random.default_rng(seed)
    verbs = ClassSets.from_labels(rng.integers(0, 8, n))
    nouns = ClassSets.from_lists([sorted({int(a), int(b)}) for a, b in rng.integers(0, 12, (n, 2))])
    return LevelRelevance(verbs, nouns)


def test_own_pairing_batches():
    rel = relevance()
    sampler = PairSampler(rel, levels=LEVELS, seed=3)
    b = sampler.batch(2, 1, 16)
    np.testing.assert_array_equal(b["video_rows"], b["text_rows"])
    np.testing.assert_array_equal(b["video_rows"], epoch_order(3, 2, 60)[16:32])
    assert b["rel"].shape == (16, 3, 16) and b["rel"].dtype == np.float32
    for i, level in enumerate(LEVELS):
        np.testing.assert_array_equal(
            b["rel"][:, i], rel.matrix(level, b["video_rows"], b["text_rows"])
        )
    assert sampler.steps_per_epoch(16) == 3
    with pytest.raises(InputError, match="batch_size"):
        sampler.steps_per_epoch(61)


def test_pure_function_of_seed_epoch_step():
    make = lambda seed: PairSampler(relevance(), levels=LEVELS, pairing="relevant", seed=seed)  # noqa: E731
    a, b = make(0).batch(1, 2, 8), make(0).batch(1, 2, 8)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(make(0).batch(1, 3, 8)["text_rows"], a["text_rows"])
    assert not np.array_equal(make(1).batch(1, 2, 8)["video_rows"], a["video_rows"])


def test_relevant_pairing_is_relevant_and_uniform():
    # Clip 0 shares classes with exactly clips 1..4 (verb or noun); every other clip is
    # unrelated, so its relevant set is {0, 1, 2, 3, 4} (itself included).
    verbs = [0, 0, 5, 6, 0] + list(range(10, 55))
    nouns = [[0], [7], [0], [0, 8], [9]] + [[20 + i] for i in range(45)]
    rel = LevelRelevance(ClassSets.from_labels(verbs), ClassSets.from_lists(nouns))
    sampler = PairSampler(rel, levels=("action",), pairing="relevant")
    draws = sampler.relevant_captions(np.zeros(20000, np.int64), np.random.default_rng(0))
    assert set(np.unique(draws)) == {0, 1, 2, 3, 4}
    counts = np.bincount(draws, minlength=5)
    np.testing.assert_allclose(counts / 20000, 0.2, atol=0.015)
    # a clip related to nothing else is paired with its own caption
    assert set(sampler.relevant_captions(np.full(50, 30), np.random.default_rng(1))) == {30}
    b = sampler.batch(0, 0, 50)
    assert np.all(b["rel"][np.arange(50), 0, np.arange(50)] > 0.1)


def rounds(rel, n, anchors, seed):
    """The rejection rounds as the sampler runs them: (draws so far, anchors missed, rng)."""
    rng, want, todo = np.random.default_rng(seed), anchors.copy(), np.ones(anchors.size, bool)
    for _ in range(32):
        cand = rng.integers(0, n, anchors.size)
        ok = todo & (rel.pairs("action", anchors, cand) > 0.1)
        want[ok], todo = cand[ok], todo & ~ok
    return want, todo, rng


def test_relevant_captions_equal_the_per_anchor_draws():
    """Anchors the rejection rounds miss draw from their exact relevant set; the draws
    equal one exact row per anchor, in anchor order, on the same generator."""
    n = 3000  # groups of 3 clips share a verb and a noun: 3 relevant clips in 3000
    rel = LevelRelevance(
        ClassSets.from_labels(np.arange(n) // 3), ClassSets.from_labels(np.arange(n) // 3)
    )
    sampler = PairSampler(rel, levels=("action",), pairing="relevant")
    anchors = np.random.default_rng(2).integers(0, n, 40)
    got = sampler.relevant_captions(anchors, np.random.default_rng(5))

    want, todo, rng = rounds(rel, n, anchors, 5)
    assert todo.sum() > 16  # many anchors fall back
    for i in np.flatnonzero(todo):
        row = rel.pairs("action", np.full(n, anchors[i]), np.arange(n))
        want[i] = np.flatnonzero(row > 0.1)[rng.integers(3)]
    np.testing.assert_array_equal(got, want)
    assert np.all(got // 3 == anchors // 3)


def test_kept_relevant_sets_change_no_draw(monkeypatch):
    """The exact sets are kept per clip signature (verb and noun sets), one per signature
    among the anchors that fall back, and give the draws of sets built afresh: a second
    pass (every set kept), a sampler that keeps none and one that keeps only the first."""
    n = 3000
    i = np.arange(n)
    # Signatures are groups of 3 clips; clips of one verb group (6) or of one noun group
    # (6, offset by 3) differ in their relevant sets (9 clips each), so a key on the verb
    # or the noun alone would draw outside a set. Captions have other rows' clip sets.
    verbs, nouns = ClassSets.from_labels(i // 6), ClassSets.from_labels((i + 3) // 6)
    shuffle = np.random.default_rng(0).permutation(n)
    captions = (
        ClassSets.from_labels(i[shuffle] // 6),
        ClassSets.from_labels((i[shuffle] + 3) // 6),
    )
    rel = LevelRelevance(verbs, nouns, *captions)
    make = lambda: PairSampler(rel, levels=("action",), pairing="relevant")  # noqa: E731
    anchors = np.random.default_rng(3).integers(0, n, 200)

    sampler = make()
    first = sampler.relevant_captions(anchors, np.random.default_rng(7))
    _, missed, _ = rounds(rel, n, anchors, 7)
    assert len(sampler._relevant) == np.unique(anchors[missed] // 3).size < missed.sum()
    for k in np.flatnonzero(missed):  # every fallback draw in its anchor's exact set
        assert rel.pairs("action", anchors[k], first[k]) > 0.1
    again = sampler.relevant_captions(anchors, np.random.default_rng(7))
    np.testing.assert_array_equal(again, first)
    for cap in (0, 9):  # nothing kept; the first set only (9 clips)
        monkeypatch.setattr(pairs, "_KEPT", cap)
        fresh = make()
        np.testing.assert_array_equal(
            fresh.relevant_captions(anchors, np.random.default_rng(7)), first
        )
        assert len(fresh._relevant) == cap // 9
        assert all(not s.flags.writeable for s in fresh._relevant.values())


def test_unknown_pairing():
    with pytest.raises(InputError, match="pairing"):
        PairSampler(relevance(), levels=LEVELS, pairing="random")
