"""Triplet sampler: validity of positives/negatives, margins, determinism, batches."""

import numpy as np
import pytest

from jaxsvr.annotations import kitchen
from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.errors import InputError
from jaxsvr.relevance import class_relevance
from jaxsvr.sampling.triplets import TripletSampler


@pytest.fixture(scope="module")
def clips():
    return kitchen.generate(8, 30, seed=3, split="train")[0]


def sampler(clips, **kw):
    verbs = clips.verb_classes.indices[clips.verb_classes.indptr[:-1]]
    return TripletSampler(verbs, clips.noun_classes, clips.noun_class, num_triplets=5, **kw)


def test_positives_and_negatives_follow_the_classes(clips):
    s = sampler(clips)
    t = s.triplets(0)
    nouns = clips.noun_classes.tolist()
    verbs = s.verbs
    action = list(zip(verbs, clips.noun_class))
    for i in range(len(clips)):
        for p, n in zip(t.positive[i, 0], t.negative[i, 0]):
            assert verbs[p] == verbs[i] and verbs[n] != verbs[i]
        for p, n in zip(t.positive[i, 1], t.negative[i, 1]):
            assert set(nouns[p]) & set(nouns[i])
            assert set(nouns[n]) - set(nouns[i])
        for p, n in zip(t.positive[i, 2], t.negative[i, 2]):
            assert action[p] == action[i] and action[n] != action[i]


def test_relevance_margins_match_class_relevance(clips):
    s = sampler(clips, margin="relevance")
    t = s.triplets(0)
    rel = class_relevance(
        clips.verb_classes, clips.noun_classes, clips.verb_classes, clips.noun_classes
    )
    anchors = np.arange(len(clips))[:, None]
    np.testing.assert_allclose(t.margin[:, 2], 1 - rel[anchors, t.negative[:, 2]], atol=1e-6)
    np.testing.assert_allclose(t.margin[:, 0], 0.5)  # verbs are single: IoU 0 for negatives
    nouns = clips.noun_classes.tolist()
    for i in range(0, len(clips), 7):
        for n, m in zip(t.negative[i, 1], t.margin[i, 1]):
            a, b = set(nouns[i]), set(nouns[n])
            assert m == pytest.approx(0.5 * (1 - len(a & b) / len(a | b)))
    fixed = sampler(clips, margin="fixed", fixed_margin=0.7).triplets(0)
    np.testing.assert_array_equal(fixed.margin, np.float32(0.7))


def test_pure_function_of_seed_and_epoch(clips):
    a, b = sampler(clips, seed=1), sampler(clips, seed=1)
    for epoch, step in [(0, 0), (3, 2), (12, 1)]:
        ra, ma = a.batch(epoch, step, 16)
        rb, mb = b.batch(epoch, step, 16)
        np.testing.assert_array_equal(ra, rb)
        np.testing.assert_array_equal(ma, mb)
    # same block (epochs 0-9) shares triplets, the next block redraws them
    np.testing.assert_array_equal(a.triplets(0).negative, b.triplets(0).negative)
    assert not np.array_equal(a.triplets(0).negative, a.triplets(1).negative)
    assert not np.array_equal(a.batch(0, 0, 16)[0], sampler(clips, seed=2).batch(0, 0, 16)[0])


def test_batch_layout(clips):
    s = sampler(clips, levels=("action",))
    rows, margin = s.batch(2, 1, 8)
    assert rows.shape == (8, 1 + 2 * 5) and margin.shape == (8, 1, 5)
    anchors = s.epoch_order(2)[8:16]
    np.testing.assert_array_equal(rows[:, 0], anchors)
    t = s.triplets(0)
    np.testing.assert_array_equal(rows[:, 1:6], t.positive[anchors, 0])
    np.testing.assert_array_equal(rows[:, 6:], t.negative[anchors, 0])
    assert s.steps_per_epoch(8) == len(clips) // 8


def test_errors():
    one_verb = TripletSampler(np.zeros(4, int), ClassSets.from_lists([[0], [1], [0], [1]]))
    with pytest.raises(InputError, match="no verb negative"):
        one_verb.triplets(0)
    with pytest.raises(InputError, match="margin"):
        TripletSampler(np.arange(4), ClassSets.from_lists([[0]] * 4), margin="soft")
    with pytest.raises(InputError, match="batch size"):
        TripletSampler(np.arange(4), ClassSets.from_lists([[0]] * 4)).steps_per_epoch(8)
