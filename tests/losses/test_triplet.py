"""Triplet losses against a plain NumPy loop over triplets."""

import numpy as np
import pytest

from jaxsvr.losses import PAIR_TYPES, triplet_loss, triplet_terms
from jaxsvr.sampling.triplets import TripletLayout


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def loop_terms(video, text, margin, levels, k, kind):
    """{level_pair: mean loss} by explicit loops (independent of the jax code)."""
    emb = {"video": video, "text": text}
    out = {}
    for slot, level in enumerate(levels):
        for pair, (am, xm) in PAIR_TYPES.items():
            total, count = 0.0, 0
            for b in range(margin.shape[0]):
                a = emb[am][level][b, 0]
                for t in range(k):
                    p = emb[xm][level][b, 1 + 2 * k * slot + t]
                    n = emb[xm][level][b, 1 + 2 * k * slot + k + t]
                    if kind == "squared_euclidean":
                        dp, dn = np.sum((a - p) ** 2), np.sum((a - n) ** 2)
                    else:
                        dp, dn = 1 - a @ p, 1 - a @ n
                    total += max(0.0, margin[b, slot, t] + dp - dn)
                    count += 1
            out[f"{level}_{pair}"] = total / count
    return out


@pytest.mark.parametrize("kind", ["squared_euclidean", "cosine"])
def test_terms_match_loop(kind):
    rng = np.random.default_rng(0)
    levels, k, b = ("verb", "noun", "action"), 3, 5
    m = 1 + 2 * k * len(levels)
    video = {lv: unit(rng.normal(size=(b, m, 8))).astype(np.float32) for lv in levels}
    text = {lv: unit(rng.normal(size=(b, m, 8))).astype(np.float32) for lv in levels}
    margin = rng.uniform(0, 1, (b, len(levels), k)).astype(np.float32)
    got = triplet_terms(
        video,
        text,
        margin,
        levels=levels,
        layout=TripletLayout(levels, k),
        distance_kind=kind,
    )
    want = loop_terms(video, text, margin, levels, k, kind)
    assert set(got) == set(want) and len(got) == 12
    for key in want:
        np.testing.assert_allclose(float(got[key]), want[key], rtol=1e-5, atol=1e-6)


def test_single_triplet_hand_worked():
    a = np.array([1.0, 0.0], np.float32)
    p = np.array([0.0, 1.0], np.float32)  # d = 2
    n = np.array([-1.0, 0.0], np.float32)  # d = 4
    assert float(triplet_loss(a, p, n, 1.0)) == 0.0  # 1 + 2 - 4 < 0
    assert float(triplet_loss(a, p, n, 3.0)) == pytest.approx(1.0)
    assert float(triplet_loss(a, n, p, 0.5)) == pytest.approx(2.5)
    assert float(triplet_loss(a, p, n, 0.0, "cosine")) == 0.0  # 1 - 2 < 0
