"""Synthetic features: determinism, shapes, class signal, hidden nouns, segments, real CSVs."""

import csv
import dataclasses

import numpy as np
import pytest

from jaxsvr.annotations import epic100, kitchen
from jaxsvr.inputs.synthetic import (
    SyntheticSpec,
    clip_features,
    hidden_nouns,
    main_nouns,
    prototypes,
)

NV, NN = len(kitchen.VERBS), len(kitchen.NOUNS)
# Signal only: features are exactly the prototype mixtures.
CLEAN = SyntheticSpec(noise=0.0, video_nuisance=0.0, clip_jitter=0.0)


@pytest.fixture(scope="module")
def clips():
    return kitchen.generate(4, 20, seed=0)[0]


def _subset(clips: epic100.Clips, rows) -> epic100.Clips:
    rows = np.asarray(rows, np.int64)
    pick = lambda xs: [xs[r] for r in rows]  # noqa: E731
    return epic100.Clips(
        pick(clips.narration_id),
        pick(clips.video_id),
        pick(clips.narration),
        clips.start_s[rows],
        clips.stop_s[rows],
        pick(clips.verb),
        pick(clips.nouns),
        clips.verb_classes.take(rows),
        clips.noun_classes.take(rows),
    )


def test_shapes_dtype_finite(clips):
    x = clip_features(clips, NV, NN, seed=0, split="train")
    assert x.shape == (80, 3072) and x.dtype == np.float32 and np.isfinite(x).all()
    xs = clip_features(clips, NV, NN, seed=0, split="train", segments=4)
    assert xs.shape == (80, 4, 3072) and xs.dtype == np.float32 and np.isfinite(xs).all()
    small = SyntheticSpec(block_dim=16, nuisance_rank=4)
    assert clip_features(clips, NV, NN, seed=0, split="a", spec=small).shape == (80, 48)
    empty = _subset(clips, [])
    assert clip_features(empty, NV, NN, seed=0, split="a", segments=2).shape == (0, 2, 3072)


def test_deterministic_and_independent_of_chunks_threads_order(clips):
    x = clip_features(clips, NV, NN, seed=0, split="train")
    assert x.tobytes() == clip_features(clips, NV, NN, seed=0, split="train").tobytes()
    for chunk_rows, workers in ((1, 1), (7, 2), (33, 2)):
        y = clip_features(
            clips, NV, NN, seed=0, split="train", chunk_rows=chunk_rows, workers=workers
        )
        assert np.array_equal(x, y)
    seg = clip_features(clips, NV, NN, seed=0, split="train", segments=4)
    seg_chunked = clip_features(clips, NV, NN, seed=0, split="train", segments=4, chunk_rows=3)
    assert np.array_equal(seg, seg_chunked)
    # Keyed by narration_id: a permuted table (same videos, same neighbours) permutes rows.
    perm = np.random.default_rng(0).permutation(len(clips))
    assert np.array_equal(
        clip_features(_subset(clips, perm), NV, NN, seed=0, split="train"), x[perm]
    )


def test_splits_share_prototypes_not_noise(clips):
    train = clip_features(clips, NV, NN, seed=0, split="train")
    test = clip_features(clips, NV, NN, seed=0, split="test")
    assert not np.allclose(train, test)
    assert abs(np.corrcoef(train.ravel(), test.ravel())[0, 1]) < 0.2
    # Without noise and hiding (both drawn per split) the two splits are identical.
    clean = dataclasses.replace(CLEAN, hide_noun=0.0)
    a = clip_features(clips, NV, NN, seed=0, split="train", spec=clean)
    assert np.array_equal(a, clip_features(clips, NV, NN, seed=0, split="test", spec=clean))
    assert not np.allclose(a, clip_features(clips, NV, NN, seed=1, split="train", spec=clean))
    # In both splits the most frequent verb's mean feature points to its prototype.
    verb = clips.verb_classes.indices
    top = np.bincount(verb).argmax()
    p = prototypes(NV, NN, seed=0).verb
    for x in (train, test):
        proj = np.sort(p @ x[verb == top].mean(0))
        assert (p @ x[verb == top].mean(0)).argmax() == top and proj[-1] > 2 * proj[-2]


def test_clip_correlates_with_own_verb(clips):
    x = clip_features(clips, NV, NN, seed=0, split="train")
    proj = x @ prototypes(NV, NN, seed=0).verb.T  # [n, NV]
    verb = clips.verb_classes.indices
    own = proj[np.arange(len(clips)), verb]
    others = (proj.sum(1) - own) / (NV - 1)
    assert (own > others).mean() > 0.85
    assert (proj.argmax(1) == verb).mean() > 0.4  # chance is 1 / 14


def test_signal_matches_reference(clips):
    """Noise-free features equal verb + weighted nouns, hidden nouns moved to neighbours."""
    spec = dataclasses.replace(CLEAN, hide_noun=0.3)
    x = clip_features(clips, NV, NN, seed=0, split="train", spec=spec)
    protos = prototypes(NV, NN, seed=0, spec=spec)
    block = lambda s: np.repeat(np.asarray(s, np.float32), spec.block_dim)  # noqa: E731
    verb_t, noun_t = (
        protos.verb * block(spec.verb_strength),
        protos.noun * block(spec.noun_strength),
    )
    hidden, main = hidden_nouns(clips, seed=0, split="train", spec=spec), main_nouns(clips)
    assert 0 < hidden.sum() < len(clips)

    def nouns(i):
        ws = {c: spec.main_noun_weight if c == main[i] else 1.0 for c in clips.noun_classes[i]}
        return sum(w * noun_t[c] for c, w in ws.items()) / sum(ws.values())

    expected = np.zeros_like(x)
    for rows in clips.video_clips().values():
        for k, i in enumerate(rows):
            expected[i] = verb_t[clips.verb_classes[i][0]] + (0 if hidden[i] else nouns(i))
            for j in (k - 1, k + 1):
                if 0 <= j < len(rows) and hidden[rows[j]]:
                    expected[i] += spec.neighbour_leak * nouns(rows[j])
    np.testing.assert_allclose(x, spec.signal * expected, rtol=1e-4, atol=1e-5)
    # A hidden clip's main noun is visible in a neighbour, not in the clip itself.
    i = int(np.flatnonzero(hidden & (main >= 0))[0])
    n_proj = x @ protos.noun[main[i]]
    rows = clips.video_clips()[clips.video_id[i]]
    k = int(np.flatnonzero(rows == i)[0])
    near = [rows[j] for j in (k - 1, k + 1) if 0 <= j < len(rows)]
    assert max(n_proj[near]) > n_proj[i] + 0.2 * spec.signal * spec.block_dim


def test_hidden_fraction_and_prototype_pairs():
    many = kitchen.generate(20, 50, seed=1)[0]
    hidden = hidden_nouns(many, seed=0, split="train")
    assert abs(hidden.mean() - SyntheticSpec().hide_noun) < 0.03
    assert not hidden_nouns(many, seed=0, split="x", spec=SyntheticSpec(hide_noun=0)).any()
    protos = prototypes(97, 300, seed=0)
    d = protos.noun.shape[1] // 3
    paired = np.flatnonzero(protos.noun_partner >= 0)
    assert 0.15 < paired.size / 300 < 0.45
    a, b = protos.noun[paired, :d], protos.noun[protos.noun_partner[paired], :d]
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert np.all(np.abs(cos - 0.6) < 0.12)
    # Verb prototypes do not depend on the noun vocabulary.
    assert np.array_equal(prototypes(97, 10, seed=0).verb, protos.verb)


def test_segments_mean_to_clip_signal(clips):
    seg = clip_features(clips, NV, NN, seed=0, split="train", spec=CLEAN, segments=4)
    clip = clip_features(clips, NV, NN, seed=0, split="train", spec=CLEAN)
    np.testing.assert_allclose(seg.mean(1), clip, rtol=1e-4, atol=1e-4)
    assert np.abs(seg[:, 0] - seg[:, 2]).max() > 0.1  # the envelope moves over segments
    # With noise, the segment mean has the clip feature's noise level.
    noisy = clip_features(clips, NV, NN, seed=0, split="train", segments=4).mean(1)
    plain = clip_features(clips, NV, NN, seed=0, split="train")
    assert abs(noisy.std() / plain.std() - 1) < 0.05


def test_bad_arguments(clips):
    with pytest.raises(ValueError, match="num_nouns"):
        clip_features(clips, NV, 3, seed=0, split="train")
    with pytest.raises(ValueError, match="segments"):
        clip_features(clips, NV, NN, seed=0, split="train", segments=-1)
    with pytest.raises(ValueError, match="hide_noun"):
        SyntheticSpec(hide_noun=1.5)
    with pytest.raises(ValueError, match="one value per"):
        SyntheticSpec(verb_strength=(1.0, 1.0))


def test_real_train_slice(epic_dir):
    path = epic_dir / epic100.TRAIN_CLIPS
    if not path.is_file():
        pytest.skip(f"{path} not found")
    clips = epic100.read_clips(path)
    with path.open(newline="") as f:
        noun_class = np.array([int(r["noun_class"]) for r in csv.DictReader(f)])
    main = main_nouns(clips)
    # The main noun is recovered for nearly every clip, and always correctly.
    assert (main >= 0).mean() > 0.99 and np.array_equal(main[main >= 0], noun_class[main >= 0])
    part = _subset(clips, np.arange(400))
    x = clip_features(part, 97, 300, seed=0, split="train")
    assert x.shape == (400, 3072) and np.isfinite(x).all()
    proj = x @ prototypes(97, 300, seed=0).verb.T
    assert (proj.argmax(1) == part.verb_classes.indices).mean() > 0.1  # chance ~ 1 / 97
