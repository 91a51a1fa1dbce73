"""Metrics: hand-worked cases, plain-loop reference, official-style baseline, both engines."""

import math

import ek100_baseline
import numpy as np
import pytest
from ek100_baseline import tie_free_similarity
from reference_metrics import reference_metrics

from jaxsvr.errors import InputError
from jaxsvr.evaluation import evaluate

ENGINES = ["numpy", "jax"]


def _single_query(s, r, **kw):
    """v2t metrics of one query (t2v has one item per query, so it is not checked here)."""
    return evaluate(np.array([s], np.float32), np.array([r], np.float32), **kw)


@pytest.mark.parametrize("backend", ENGINES)
def test_hand_worked_graded_map_and_cutoff(backend):
    m = _single_query([0.9, 0.8, 0.7, 0.6], [0.5, 1, 0, 1], backend=backend)
    # K = 3 relevant items: DCG over ranks 1..3 = 0.5/1 + 1/log2(3) + 0/2.
    dcg, idcg = 0.5 + 1 / math.log2(3), 1 + 1 / math.log2(3) + 0.5 / 2
    assert m["ndcg_v2t"] == pytest.approx(dcg / idcg, abs=1e-12)
    # Graded numerator: at rank 2 the 0.5 above counts, (0.5 + 1) / 2; at rank 4, 2.5 / 4.
    assert m["map_v2t"] == pytest.approx(0.5 * (1.5 / 2 + 2.5 / 4), abs=1e-12)
    assert m["map_binary_v2t"] == pytest.approx(0.5 * (1 / 2 + 2 / 4), abs=1e-12)
    exp_dcg = (2**0.5 - 1) + 1 / math.log2(3)
    exp_idcg = 1 + 1 / math.log2(3) + (2**0.5 - 1) / 2
    assert m["ndcg_exp_v2t"] == pytest.approx(exp_dcg / exp_idcg, abs=1e-12)
    assert (m["r1_v2t"], m["r5_v2t"], m["medr_v2t"]) == (0.0, 100.0, 2.0)


@pytest.mark.parametrize("backend", ENGINES)
def test_recall_bounds_use_the_best_and_the_worst_ranked_positive(backend):
    # Positives at threshold 0.5 rank 2, 3 and 7: found at 5 by the best one (upper bound),
    # not by the worst (lower bound), found at 10 by both.
    r = [0, 1, 0.5, 0, 0.25, 0, 0.75, 0, 0, 0, 0, 0]
    s = [1 - i / 16 for i in range(len(r))]
    m = _single_query(s, r, threshold=0.5, bounds=True, backend=backend)
    assert (m["r1_v2t"], m["r5_v2t"], m["r10_v2t"]) == (0.0, 100.0, 100.0)
    assert (m["r1_lower_v2t"], m["r5_lower_v2t"], m["r10_lower_v2t"]) == (0.0, 0.0, 100.0)
    assert m["geomean_lower_v2t"] == 0.0 and m["medr_v2t"] == 2.0
    assert "r1_lower_v2t" not in _single_query(s, r, threshold=0.5, backend=backend)
    m = evaluate(np.eye(3, dtype=np.float32), np.eye(3, dtype=np.float32), bounds=True)
    assert m["rsum_lower"] == m["rsum"] == 600.0  # one positive per query: bounds meet


@pytest.mark.parametrize("backend", ENGINES)
def test_cutoff_drops_relevant_items_ranked_past_k(backend):
    m = _single_query([0.9, 0.8, 0.7], [0, 0, 1], backend=backend)
    assert m["ndcg_v2t"] == 0.0  # K = 1 and rank 1 holds an irrelevant item
    assert m["ndcg_nocut_v2t"] == pytest.approx(1 / math.log2(4))
    assert m["map_v2t"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("backend", ENGINES)
def test_ties_rank_less_relevant_first(backend):
    m = _single_query([0.5, 0.5, 0.5], [1, 0, 0.5], backend=backend)
    # Order 0, 0.5, 1; K = 2: DCG = 0 + 0.5/log2(3), IDCG = 1 + 0.5/log2(3).
    assert m["ndcg_v2t"] == pytest.approx((0.5 / math.log2(3)) / (1 + 0.5 / math.log2(3)))
    assert m["medr_v2t"] == 3.0 and m["tied_v2t"] == 1
    # -0.0 equals 0.0: a tie too, broken by relevance, not by sign or position.
    m = _single_query([-0.0, 0.0, -1.0], [1, 0, 0], backend=backend)
    assert m["medr_v2t"] == 2.0 and m["tied_v2t"] == 1
    m = _single_query([0.0, -0.0, -1.0], [1, 0, 0], backend=backend)
    assert m["medr_v2t"] == 2.0
    # A constant similarity gets the worst ranking, whatever the item order.
    m = evaluate(np.zeros((4, 4), np.float32), np.eye(4, dtype=np.float32), backend=backend)
    assert m["medr_v2t"] == 4.0 and m["medr_t2v"] == 4.0
    assert m["r1_v2t"] == 0.0 and m["map_v2t"] == pytest.approx(0.25)


@pytest.mark.parametrize("backend", ENGINES)
def test_queries_without_relevant_items_are_excluded_and_counted(backend):
    rel = np.array([[1, 0.5, 0], [0, 0, 0], [0.5, 0, 0]], np.float32)
    sim = np.array([[0.3, 0.2, 0.1], [0.5, 0.6, 0.7], [0.1, 0.9, 0.2]], np.float32)
    m = evaluate(sim, rel, backend=backend)
    assert (m["excluded_ndcg_v2t"], m["excluded_map_v2t"], m["excluded_recall_v2t"]) == (1, 2, 2)
    assert (m["excluded_ndcg_t2v"], m["excluded_map_t2v"]) == (1, 2)
    assert m["n_queries_v2t"] == 3 and m["n_queries_t2v"] == 3
    assert all(v is None or math.isfinite(v) for v in m.values())
    assert m["map_v2t"] == 1.0  # only query 0 counts, and it ranks its R = 1 item first
    m = evaluate(sim, np.zeros_like(rel), backend=backend)
    assert m["ndcg_avg"] is None and m["map_avg"] is None and m["rsum"] is None


@pytest.mark.parametrize("backend", ENGINES)
@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (17, 40), (64, 13)])
@pytest.mark.parametrize("ties", [False, True])
def test_against_plain_loops(backend, shape, ties):
    rng = np.random.default_rng(shape[0] * 100 + shape[1])
    rel = rng.choice(np.array([0, 0, 0, 0.25, 0.5, 0.75, 1], np.float32), shape)
    # Ties: few distinct similarity values, so most rows have equal scores.
    sim = rng.integers(0, 4, shape).astype(np.float32) if ties else tie_free_similarity(shape)
    for threshold in (1.0, 0.5):
        got = evaluate(sim, rel, threshold=threshold, backend=backend, bounds=True)
        want = reference_metrics(
            sim.astype(np.float64), rel.astype(np.float64), threshold=threshold, bounds=True
        )
        assert got.keys() >= want.keys()
        for key, value in want.items():
            if value is None:
                assert got[key] is None, key
            else:
                assert got[key] == pytest.approx(value, abs=1e-9), key


@pytest.mark.parametrize("backend", ENGINES)
def test_perfect_similarity_scores_one(backend):
    rng = np.random.default_rng(3)
    rel = rng.choice(np.array([0, 0.25, 0.5, 1], np.float32), (30, 20))
    rel[np.arange(20), np.arange(20)] = 1
    rel[20:, 0] = 1
    m = evaluate(rel, rel, backend=backend)
    for key in ("ndcg_avg", "ndcg_exp_avg", "ndcg_nocut_avg", "map_avg", "map_binary_avg"):
        assert m[key] == pytest.approx(1.0, abs=1e-12), key
    assert m["r1_v2t"] == 100.0 and m["medr_t2v"] == 1.0


def test_equals_official_style_on_tie_free_inputs():
    rng = np.random.default_rng(5)
    rel = rng.choice(np.array([0, 0, 1 / 3, 0.5, 2 / 3, 1], np.float32), (300, 120))
    rel[:120][np.arange(120), np.arange(120)] = 1
    rel[120:, 0] = 1
    sim = tie_free_similarity(rel.shape, seed=5)
    got = evaluate(sim, rel)
    want = ek100_baseline.evaluate(sim, rel.astype(np.float64))  # official R is float64
    for key, value in want.items():
        assert abs(got[key] - value) <= 1e-9, key


@pytest.fixture(scope="module")
def real_random(epic_test_relevance):
    """Random (tie-free) scores for the real test relevance and jaxsvr's metrics of them:
    (similarity, metrics)."""
    sim = tie_free_similarity(epic_test_relevance.shape, seed=1)
    return sim, evaluate(sim, epic_test_relevance)


def test_equals_official_style_on_real_test_relevance(epic_test_relevance, real_random):
    # A real subset (4152 x 1561; the official-style loops cost 35 s at full size, where
    # the engines are checked against each other in test_streamed.py): every second
    # sentence, every second clip with a relevance-1 sentence among them, and the
    # sentences with a relevance-1 clip among those, so no query lacks a relevance-1 item
    # (the official mAP would be NaN).
    one = epic_test_relevance == 1
    sents = np.arange(one.shape[1])[::2]
    clips = np.flatnonzero(one[:, sents].any(axis=1))[::2]
    sents = sents[one[np.ix_(clips, sents)].any(axis=0)]
    cut = np.ix_(clips, sents)
    rel, sim = epic_test_relevance[cut], real_random[0][cut]
    got = evaluate(sim, rel)
    want = ek100_baseline.evaluate(sim, rel.astype(np.float64))
    assert got["excluded_map_v2t"] == got["excluded_map_t2v"] == 0
    assert rel.shape == (4152, 1561) and all(abs(got[k] - v) <= 1e-6 for k, v in want.items())


def test_real_relevance_perfect_and_random(epic_test_relevance, real_random):
    rel = epic_test_relevance
    m = evaluate(rel, rel)
    assert m["ndcg_avg"] == pytest.approx(1.0) and m["map_avg"] == pytest.approx(1.0)
    assert m["excluded_ndcg_v2t"] == 0 and m["excluded_map_t2v"] == 0
    m = real_random[1]
    assert 0.10 < m["ndcg_avg"] < 0.12 and m["map_avg"] < 0.07


@pytest.mark.parametrize(
    "sim, rel, match",
    [
        (np.zeros((2, 3)), np.zeros((3, 2)), "same"),
        (np.array([[np.nan, 0]]), np.zeros((1, 2)), "non-finite.*row 0, column 0"),
        (np.array([[0, np.inf]]), np.zeros((1, 2)), "non-finite.*column 1"),
        (np.zeros((1, 2)), np.array([[0, 1.5]]), r"\[0, 1\]"),
        (np.zeros((1, 2)), np.array([[np.nan, 1]]), r"\[0, 1\]"),
        (np.zeros((0, 2)), np.zeros((0, 2)), "empty"),
    ],
)
def test_bad_input(sim, rel, match):
    with pytest.raises(InputError, match=match):
        evaluate(sim, rel)


@pytest.mark.parametrize("scale", [8, 40])  # similarities in [-5, 5]: packed; [-1, 1]: 32-bit
def test_numpy_engine_over_several_blocks_against_plain_loops(scale):
    """Several row blocks in both directions, transposed reads in several tiles, ties,
    negative values and -0.0 beside 0.0; one thread and two give the reference. Scores
    in [-5, 5] span too many keys for the 32-bit path (the packed sort ranks them),
    cosine-like ones in [-1, 1] take it."""
    from jaxsvr.evaluation import narrow_keys, numpy_engine

    rng = np.random.default_rng(11)
    shape = (600, 1100)  # v2t: 2 blocks of rows; t2v: 2 blocks, 2 tiles of 512 items
    assert shape[0] > numpy_engine._BLOCK_BYTES // (8 * shape[1]) > 8
    assert shape[1] > numpy_engine._BLOCK_BYTES // (8 * shape[0]) and shape[0] > 512
    rel = rng.choice(np.array([0] * 8 + [0.25, 0.5, 0.75, 1], np.float32), shape)
    sim = (rng.integers(-40, 40, shape) / scale).astype(np.float32)
    sim[(sim == 0) & (rng.random(shape) < 0.5)] = -0.0
    keys = np.empty(shape, np.int32)
    lo, hi = narrow_keys.folded_keys(sim, keys, np.empty_like(keys), numpy_engine._copy)
    assert narrow_keys.fits(lo, hi) == (scale == 40)
    want = reference_metrics(
        sim.astype(np.float64), rel.astype(np.float64), threshold=0.75, bounds=True
    )
    for workers in (1, 2):
        got = evaluate(sim, rel, threshold=0.75, backend="numpy", workers=workers, bounds=True)
        for key, value in want.items():
            assert got[key] == pytest.approx(value, abs=1e-9), (workers, key)
    assert got["tied_v2t"] == shape[0]


@pytest.mark.parametrize(
    "kind", ["tie_free", "ties", "signed_zeros", "one_sign", "wide", "short_rows", "dense_short"]
)
def test_numpy_engine_paths_give_equal_statistics(kind):
    """The 32-bit path and the packed 64-bit sort give the same statistics bit for bit:
    ties among relevant and non-relevant items, -0.0, scores of one sign far from 0,
    scores too wide for 32-bit keys (both then sort packed), and blocks of thousands of
    20-item rows (whose many relevant entries, when dense, do not pack into 64 bits)."""
    import dataclasses

    from jaxsvr.evaluation import narrow_keys, numpy_engine

    rng = np.random.default_rng(13)
    shape = (40000, 20) if kind in ("short_rows", "dense_short") else (700, 900)
    density = {"dense_short": 0.9, "short_rows": 0.1}.get(kind, 0.3)
    rel = np.where(
        rng.random(shape) < density, rng.choice(np.float32([0.25, 0.3, 0.5, 1.0]), shape), 0
    ).astype(np.float32)
    if kind in ("short_rows", "dense_short"):  # whether the first row block packs
        rows = numpy_engine._BLOCK_BYTES // (8 * shape[1])
        nnz = int(np.count_nonzero(rel[:rows]))
        assert narrow_keys.packs(rows, nnz) == (kind == "short_rows")
    sim = {
        "tie_free": lambda: rng.uniform(-1, 1, shape),
        "ties": lambda: rng.integers(0, 5, shape) / 4,
        "signed_zeros": lambda: rng.integers(-1, 2, shape) * rng.choice([-0.0, 0.5], shape),
        "one_sign": lambda: rng.uniform(1e3, 1e30, shape),
        "wide": lambda: rng.uniform(-1e3, 1e3, shape),
        "short_rows": lambda: rng.uniform(-1, 1, shape),
        "dense_short": lambda: rng.integers(0, 50, shape) / 49,
    }[kind]().astype(np.float32)
    for workers in (1, 2):
        narrow = numpy_engine.query_stats(sim, rel, threshold=0.5, workers=workers)
        packed = numpy_engine.query_stats(sim, rel, threshold=0.5, workers=workers, narrow=False)
        for got, want in zip(narrow, packed):
            for field in dataclasses.fields(want):
                a, b = getattr(got, field.name), getattr(want, field.name)
                assert np.array_equal(a, b), (kind, workers, field.name)


def test_numpy_engine_continuous_relevance_against_plain_loops():
    """Graded relevance with (almost) no repeated values: every ideal-ranking run holds one
    item, next to runs of equal gains; several blocks in both directions."""
    rng = np.random.default_rng(12)
    shape = (300, 2000)  # v2t: 3 blocks of rows; t2v: 8 blocks
    rel = np.where(rng.random(shape) < 0.2, rng.random(shape), 0).astype(np.float32)
    rel[rng.random(shape) < 0.02] = 1
    rel[rng.random(shape) < 0.02] = 0.5
    sim = tie_free_similarity(shape)
    want = reference_metrics(sim.astype(np.float64), rel.astype(np.float64))
    got = evaluate(sim, rel, backend="numpy")
    for key, value in want.items():
        assert got[key] == pytest.approx(value, abs=1e-9), key


@pytest.mark.parametrize(
    "bad, match",
    [("sim_nan", "non-finite values \\(first at row 1000, column 7\\)"), ("rel_high", "in \\[0")],
)
def test_bad_values_found_in_large_inputs(bad, match):
    """Inputs large enough that their value ranges are read in parallel threads."""
    shape = (2048, 2048)
    sim, rel = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
    if bad == "sim_nan":
        sim[1000, 7] = np.nan
    else:
        rel[5, 5] = 1.5
    with pytest.raises(InputError, match=match):
        evaluate(sim, rel)
