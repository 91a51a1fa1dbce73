"""Synthetic caption features: a frozen encoder (equal text -> equal feature) that knows
classes (captions sharing classes are closer) and wording."""

import numpy as np
import pytest

from jaxsvr.annotations import kitchen
from jaxsvr.annotations.class_sets import ClassSets
from jaxsvr.inputs.synthetic_text import TextSpec, caption_features


def features(captions, verbs, nouns, **kw):
    return caption_features(
        captions, ClassSets.from_labels(verbs), ClassSets.from_lists(nouns), None, 10, 10, **kw
    )


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_equal_text_equal_feature_and_determinism():
    caps = ["take plate", "put down plate", "take plate", "wash knife"]
    f = features(caps, [0, 1, 0, 2], [[0], [0], [0], [1]], seed=3)
    assert f.shape == (4, 512) and f.dtype == np.float32 and np.isfinite(f).all()
    np.testing.assert_array_equal(f[0], f[2])
    np.testing.assert_array_equal(f, features(caps, [0, 1, 0, 2], [[0], [0], [0], [1]], seed=3))
    assert not np.allclose(f, features(caps, [0, 1, 0, 2], [[0], [0], [0], [1]], seed=4))
    # a caption's feature does not depend on the other rows
    np.testing.assert_array_equal(f[3], features(caps[3:], [2], [[1]], seed=3)[0])


def test_shared_classes_are_closer_than_other_classes():
    clips, _ = kitchen.generate(20, 20, seed=0, split="train")
    f = unit(
        caption_features(
            clips.narration,
            clips.verb_classes,
            clips.noun_classes,
            clips.noun_class,
            len(kitchen.VERBS),
            len(kitchen.NOUNS),
        )
    )
    verbs = clips.verb_classes.indices
    nouns = np.array([n for n in clips.noun_class])
    cos = f @ f.T
    same = (verbs[:, None] == verbs[None]) & (nouns[:, None] == nouns[None])
    differ = (verbs[:, None] != verbs[None]) & (nouns[:, None] != nouns[None])
    np.fill_diagonal(same, False)
    assert cos[same].mean() > cos[differ].mean() + 0.3


def test_spec_validation():
    with pytest.raises(ValueError, match="noise"):
        TextSpec(noise=-1)
    with pytest.raises(ValueError, match="dim"):
        TextSpec(dim=0)
    with pytest.raises(ValueError, match="length"):
        features(["a", "b"], [0], [[0]])
