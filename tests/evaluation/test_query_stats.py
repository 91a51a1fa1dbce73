"""Sparse statistics: the shortcuts for few distinct gains and exact sums give the general
path's numbers bit for bit."""

import dataclasses

import numpy as np
import pytest

from jaxsvr.evaluation import numpy_engine, query_stats


def _block(rng, gains, n_queries=60, n_items=500, density=0.2):
    """A ranked block's entries: count [n_queries], pos (rank order), gain float32."""
    rel = np.where(
        rng.random((n_queries, n_items)) < density, rng.choice(gains, (n_queries, n_items)), 0
    )
    rel[:3] = 0  # queries without entries
    count = np.count_nonzero(rel, axis=1)
    pos = np.concatenate([np.sort(rng.choice(n_items, c, replace=False)) for c in count])
    gain = np.concatenate([rng.permutation(r[r > 0]) for r in rel]).astype(np.float32)
    return count, pos, gain, n_items


GAINS = {
    "few": np.float32([0.25, 1 / 3, 0.5, 2 / 3, 0.75, 1.0]),  # sums exact in float64
    "few_tiny": np.float32([1e-9, 1 / 3, 0.5, 1.0]),  # sums inexact: sequential cumsum
    "continuous": None,  # many distinct gains: no codes
}


@pytest.mark.parametrize("kind", GAINS)
def test_gain_codes_and_exact_sums_equal_the_general_path(kind, monkeypatch):
    rng = np.random.default_rng(3)
    gains = GAINS[kind]
    if gains is None:
        gains = np.append(rng.uniform(0.01, 1, 4000), np.ones(400)).astype(np.float32)
    block = _block(rng, gains)
    fast = query_stats.sparse_stats(*block, threshold=0.5)
    with monkeypatch.context() as m:
        m.setattr(query_stats, "_few_gains", lambda gain, count: None)
        m.setattr(query_stats, "_exact_sums", lambda lo, hi, n: False)
        general = query_stats.sparse_stats(*block, threshold=0.5)
    coded = query_stats._few_gains(block[2], block[0])
    assert (coded is not None) == (kind != "continuous")
    assert general.keys() == fast.keys()
    for key, value in general.items():
        assert value.dtype == fast[key].dtype and np.array_equal(value, fast[key]), key


def test_exact_sums_bound():
    """Sums of float32 gains >= lo are multiples of lo's lowest bit: exact while the total
    stays within 2^53 of them."""
    assert query_stats._exact_sums(0.25, 1.0, 2**20)
    lowest = 2.0 ** (-2 - 23)  # 0.25's binade
    assert query_stats._exact_sums(0.25, 1.0, int(2**53 * lowest))
    assert not query_stats._exact_sums(0.25, 1.0, int(2**53 * lowest) + 1)
    assert not query_stats._exact_sums(1e-30, 1.0, 10**6)


def test_gains_sharing_a_slot_take_the_general_path():
    values = np.linspace(0.01, 1, 20000, dtype=np.float32)
    slot = (values.view(np.uint32) * query_stats._HASH) >> np.uint32(32 - query_stats._SLOT_BITS)
    _, first = np.unique(slot, return_index=True)
    clash = np.setdiff1d(np.arange(values.size), first)[0]  # shares a slot with an earlier value
    partner = first[np.searchsorted(np.unique(slot), slot[clash])]
    gain = np.float32([values[partner], values[clash], 1.0, values[partner]])
    assert query_stats._few_gains(gain, np.array([4])) is None
    assert query_stats._few_gains(np.float32([values[partner], 1.0]), np.array([2])) is not None


def test_engine_with_codes_equals_the_general_path_at_several_blocks(monkeypatch):
    """Both directions over several blocks, ties, threshold below 1."""
    rng = np.random.default_rng(4)
    shape = (600, 1100)
    rel = rng.choice(np.float32([0] * 8 + [0.25, 0.5, 0.75, 1]), shape)
    sim = (rng.integers(-40, 40, shape) / 40).astype(np.float32)
    fast = numpy_engine.query_stats(sim, rel, threshold=0.75, workers=2)
    monkeypatch.setattr(query_stats, "_few_gains", lambda gain, count: None)
    monkeypatch.setattr(query_stats, "_exact_sums", lambda lo, hi, n: False)
    general = numpy_engine.query_stats(sim, rel, threshold=0.75, workers=2)
    for got, want in zip(fast, general):
        for field in dataclasses.fields(want):
            assert np.array_equal(getattr(got, field.name), getattr(want, field.name))
