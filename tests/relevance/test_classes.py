"""Class relevance against plain Python sets, its properties, and the real EK-100 figures."""

import numpy as np
import pytest

from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.relevance import RelevanceIndex, class_relevance, iou_table


def _iou(a, b):
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else 0.0


def _random_sets(rng, n, n_classes, max_size):
    return [
        rng.choice(n_classes, rng.integers(1, max_size + 1), replace=False).tolist()
        for _ in range(n)
    ]


def test_against_python_sets():
    rng = np.random.default_rng(0)
    av, an = _random_sets(rng, 50, 6, 2), _random_sets(rng, 50, 12, 3)
    bv, bn = _random_sets(rng, 30, 6, 2), _random_sets(rng, 30, 12, 3)
    want = np.array(
        [
            [0.5 * _iou(av[i], bv[j]) + 0.5 * _iou(an[i], bn[j]) for j in range(30)]
            for i in range(50)
        ]
    )
    sets = [ClassSets.from_lists(x) for x in (av, an, bv, bn)]
    got = class_relevance(*sets, chunk_rows=7)
    assert got.dtype == np.float32 and got.shape == (50, 30)
    np.testing.assert_allclose(got, want, atol=1e-7)


def test_single_verb_reduces_to_equality():
    verbs = ClassSets.from_labels([0, 1, 0])
    nouns = ClassSets.from_lists([[5], [5], [6, 7]])
    rel = class_relevance(verbs, nouns, verbs, nouns)
    np.testing.assert_allclose(rel, [[1, 0.5, 0.5], [0.5, 1, 0], [0.5, 0, 1]])


def test_properties_and_batch_index():
    rng = np.random.default_rng(1)
    verbs = ClassSets.from_labels(rng.integers(0, 8, 300))
    nouns = ClassSets.from_lists(_random_sets(rng, 300, 20, 3))
    rel = class_relevance(verbs, nouns, verbs, nouns)
    assert rel.min() >= 0 and rel.max() <= 1
    np.testing.assert_array_equal(np.diag(rel), 1.0)
    np.testing.assert_array_equal(rel, rel.T)
    index = RelevanceIndex(verbs, nouns)
    batch = rng.permutation(300)[:64]
    np.testing.assert_array_equal(index.matrix(batch), rel[np.ix_(batch, batch)])
    np.testing.assert_array_equal(
        index.matrix(batch[:5], batch[5:9]), rel[np.ix_(batch[:5], batch[5:9])]
    )


def test_empty_sets_have_zero_iou():
    a = ClassSets.from_lists([[], [1]])
    np.testing.assert_array_equal(iou_table(a, a), [[0, 0], [0, 1]])


def test_class_sets_ops():
    sets = ClassSets.from_lists([[3, 1, 3], [2], [], [1, 3]])
    assert sets.tolist() == [(1, 3), (2,), (), (1, 3)]
    assert sets.take([3, 1]).tolist() == [(1, 3), (2,)]
    uniq, inv = sets.unique()
    assert uniq.tolist() == [(1, 3), (2,), ()] and inv.tolist() == [0, 1, 2, 0]
    with pytest.raises(ValueError):
        ClassSets(np.array([0, 2]), np.array([1], np.int32))


def test_multi_caption_video_sets():
    # Video 0 has 4 captions: class 1 in all, 2 in one (25%), 3 in none; video 1: 2 captions.
    caps = ClassSets.from_lists([[1, 2], [1], [1], [1], [5], [6]])
    groups = [0, 0, 0, 0, 1, 1]
    assert caps.aggregate(groups, rho=0.25).tolist() == [(1, 2), (5, 6)]
    assert caps.aggregate(groups, rho=0.5).tolist() == [(1,), (5, 6)]
    assert caps.aggregate(groups, rho=1.0).tolist() == [(1,), ()]
    with pytest.raises(ValueError):
        caps.aggregate(groups, rho=0)


def test_real_test_relevance(epic_test_relevance):
    rel = epic_test_relevance
    assert rel.shape == (9668, 3842) and rel.dtype == np.float32
    assert rel.mean(dtype=np.float64) == pytest.approx(0.05493, abs=5e-6)
    assert (rel == 1).mean() == pytest.approx(0.001684, abs=5e-7)
    assert rel.min() == 0 and rel.max() == 1
    # Every clip has a fully relevant sentence and every sentence a fully relevant clip.
    assert (rel == 1).any(axis=1).all() and (rel == 1).any(axis=0).all()


def test_real_train_batch(epic_dir):
    from jaxsvr.annotations import epic100

    clips = epic100.read_clips(epic_dir / epic100.TRAIN_CLIPS)
    index = RelevanceIndex(clips.verb_classes, clips.noun_classes)
    batch = np.random.default_rng(0).choice(len(clips), 512, replace=False)
    rel = index.matrix(batch)
    sub_v, sub_n = clips.verb_classes.take(batch), clips.noun_classes.take(batch)
    np.testing.assert_array_equal(rel, class_relevance(sub_v, sub_n, sub_v, sub_n))
    np.testing.assert_array_equal(np.diag(rel), 1.0)
